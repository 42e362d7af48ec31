"""C10 re-entry: the attempt that won a spend can prove it again, and no other attempt can.

A host that spends under an *attempt key* (``spend_as``) can retry after a transient
tool error or its own crash and be told ``True`` again, while every other attempt
(another process resuming the same approval, a person answering twice) is still refused.
The key names one resume attempt: the same attempt, retried, presents the same key;
two attempts that may race never share one. :func:`attempt_key` derives it from the
pending request and a secret only that attempt holds, so it is stable across retries
and restarts without being written anywhere by the host.

Ledgers store a digest of the key (:func:`attempt_digest`), never the key: whoever can
read the store cannot present it. :class:`MarkerReentry` adds re-entry to any ledger
with markers (two writes, documented window) until its backend offers ``spend_as``.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import secrets
from typing import TYPE_CHECKING

from .ids import marker_id, validate_attempt_key, validate_request_id

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
    """The attempt key of ``secret``'s attempt at ``pending`` (HMAC-SHA256, hex).

    Deterministic, so a retried or restarted attempt derives the same key from the same
    secret; bound to the request and its store, so one secret used for many requests
    never lets an attempt at one re-enter another. Never share a secret between two
    attempts that may race: both would hold the decision.
    """
    raw = secret.encode("utf-8") if isinstance(secret, str) else secret
    if not isinstance(raw, bytes) or len(raw) < MIN_SECRET_BYTES:
        raise ValueError(f"an attempt secret needs at least {MIN_SECRET_BYTES} bytes")
    request = validate_request_id(pending.request_id)
    store = (pending.store_id or "").encode("utf-8")
    message = b"decision-ledger attempt-key v1\x00%d:%s%s" % (len(store), store, request)
    return hmac.new(raw, message, hashlib.sha256).hexdigest()


def winner_marker(request_id: str, attempt_key: str) -> bytes:
    """The marker :class:`MarkerReentry` spends after ``attempt_key`` won ``request_id``.

    One digest of both, so the marker stays short for a 1024-byte id and names no key.
    """
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
        value = getattr(self._ledger, "store_id", None)
        return value if isinstance(value, str) else None

    def __getattr__(self, name: str) -> object:  # is_spent, describe, spent_ids, close, ...
        return getattr(self._ledger, name)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self._ledger!r}>"


class MarkerReentry(_Wrapper):
    """Re-entry for a sync ledger with markers but no ``spend_as``: two writes.

    ``spend_as`` spends the id, then the marker :func:`winner_marker`; a later
    ``spend_as`` that finds the id spent answers ``True`` only if that marker is there.
    Weaker than C10 in one window: if the process dies (or the marker write fails)
    between the two writes, the winner cannot re-enter and is refused, as it would be
    without re-entry. No other attempt ever runs: a marker is written only after a win.
    """

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
