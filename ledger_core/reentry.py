"""C10 re-entry: the attempt that won a spend can prove it again, and no other attempt can.

A host that spends under an *attempt key* (``spend_as``) is told ``True`` again when it
retries after a tool error or a crash; every other attempt is still refused. The key
names one resume attempt (:func:`attempt_key`: from the pending request and a secret
only that attempt holds, so nothing is written by the host). Ledgers store a digest of
the key, never the key (:func:`attempt_digest`). :class:`MarkerReentry` adds re-entry to
any ledger with markers (two writes, with a window) until its backend has ``spend_as``.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import secrets
from typing import TYPE_CHECKING

from .ids import marker_id, validate_attempt_key, validate_request_id
from .protocol import store_id_of

if TYPE_CHECKING:
    from .host import PendingRequest

MIN_SECRET_BYTES = 16
WINNER_KIND = "won-by"  # the marker MarkerReentry writes after a won spend


def attempt_digest(attempt_key: str) -> bytes:
    """The 32 bytes a ledger stores for a key (C10): equal keys, equal digests; the key
    itself cannot be read back from the store."""
    raw = validate_attempt_key(attempt_key)
    return hashlib.sha256(b"decision-ledger attempt\x00" + raw).digest()


def new_attempt_secret() -> str:
    """A fresh secret for one resume attempt (keep it with that attempt to re-enter)."""
    return secrets.token_urlsafe(32)


def attempt_key(pending: PendingRequest, secret: bytes | str) -> str:
    """The attempt key of ``secret``'s attempt at ``pending`` (HMAC-SHA256, hex):
    the same for a retried attempt, bound to the request and its store. Never share a
    secret between two attempts that may race: both would hold the decision."""
    raw = secret.encode("utf-8") if isinstance(secret, str) else secret
    if not isinstance(raw, bytes) or len(raw) < MIN_SECRET_BYTES:
        raise ValueError(f"an attempt secret needs at least {MIN_SECRET_BYTES} bytes")
    request = validate_request_id(pending.request_id)
    store = (pending.store_id or "").encode("utf-8")
    message = b"decision-ledger attempt-key v1\x00%d:%s%s" % (len(store), store, request)
    return hmac.new(raw, message, hashlib.sha256).hexdigest()


def winner_marker(request_id: str, attempt_key: str) -> bytes:
    """The marker :class:`MarkerReentry` spends after ``attempt_key`` won ``request_id``
    (one digest of both: short for a 1024-byte id, and naming no key)."""
    digest = attempt_digest(attempt_key)
    subject = hashlib.sha256(digest + validate_request_id(request_id)).hexdigest()
    return marker_id(WINNER_KIND, subject)


class _Wrapper:
    def __init__(self, ledger: object) -> None:
        for name in ("spend", "spend_marker", "is_marker_spent"):
            if not callable(getattr(ledger, name, None)):
                raise TypeError(f"MarkerReentry needs a ledger with {name}()")
        self._ledger = ledger

    @property
    def store_id(self) -> str | None:
        return store_id_of(self._ledger)

    def __getattr__(self, name: str) -> object:  # is_spent, describe, spent_ids, close, ...
        return getattr(self._ledger, name)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self._ledger!r}>"


class MarkerReentry(_Wrapper):
    """Re-entry for a sync ledger with markers but no ``spend_as``: the id, then the
    :func:`winner_marker`; a later ``spend_as`` that finds the id spent answers ``True``
    only if that marker is there. If the process dies between the two writes, the winner
    is refused, as without re-entry; no other attempt ever runs."""

    def spend_as(self, request_id: str, attempt_key: str) -> bool:
        marker = winner_marker(request_id, attempt_key)
        ledger = self._ledger
        if ledger.spend(request_id) is True:  # type: ignore[attr-defined]
            # The win stands; a failed marker only loses a later re-entry (fail closed).
            with contextlib.suppress(Exception):
                ledger.spend_marker(marker)  # type: ignore[attr-defined]
            return True
        return ledger.is_marker_spent(marker) is True  # type: ignore[attr-defined]


class AsyncMarkerReentry(_Wrapper):
    """The same for an async ledger."""

    async def spend_as(self, request_id: str, attempt_key: str) -> bool:
        marker = winner_marker(request_id, attempt_key)
        ledger = self._ledger
        if await ledger.spend(request_id) is True:  # type: ignore[attr-defined]
            # The win stands; a failed marker only loses a later re-entry (fail closed).
            with contextlib.suppress(Exception):
                await ledger.spend_marker(marker)  # type: ignore[attr-defined]
            return True
        return await ledger.is_marker_spent(marker) is True  # type: ignore[attr-defined]
