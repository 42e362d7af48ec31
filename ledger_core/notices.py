"""The library's warnings, through the ``decision_ledger`` logger, once per process for
each store: a host's log shows a store that can never prove, or a store an open just
created (a mistyped path reads as "not spent" for every id), without being flooded."""

from __future__ import annotations

import logging
import threading

from .protocol import LedgerInfo

LOGGER = logging.getLogger("decision_ledger")
_said: set[tuple[str, str]] = set()
_lock = threading.Lock()


def _once(kind: str, where: str, message: str) -> None:
    with _lock:
        if (kind, where) in _said:
            return
        _said.add((kind, where))
    LOGGER.warning(message)


def never_proves_line(info: LedgerInfo) -> str | None:
    """The doctor's identity line for a ledger without a ``store_id`` (reason and fix)."""
    from .doctor import identity_check  # the doctor's own words, written once

    check = identity_check(info)
    return None if info.store_id is not None else f"{check.detail}; fix: {check.fix}"


def never_proves(info: LedgerInfo) -> None:
    """Warn once per process and store that a ledger opened here can never prove. The
    reason is the store's (its file system, its server's settings), so a second
    namespace of the same store repeats nothing; another reason is said again."""
    line = never_proves_line(info)
    if line is not None:
        where = info.location or info.backend
        message = f"ledger at {where}: {line}"
        _once("never-proves", message, message)


def created(location: str, namespace: str | None = None) -> None:
    """A backend calls this when its open created the store (``create``, the default),
    or ``namespace`` in a store that was there (a mistyped namespace is a new store too)."""
    where = location if namespace is None else f"{location} (namespace {namespace!r})"
    _once(
        "created",
        where,
        f"new ledger: created an empty store at {where}, as expected on first use. If"
        " you meant an existing ledger, this URL does not name it (every id would read"
        " 'not spent'): check the URL; create=False refuses a missing store",
    )
