"""``sqlite3`` exceptions read for what they mean to a ledger (no I/O): a busy lock, a
store that forgot, a connection that must not be pooled again. (A path is no secret.)"""

from __future__ import annotations

import sqlite3

from ledger_core.errors import LedgerUnavailable

_SQLITE_BUSY = 5  # sqlite3.SQLITE_BUSY exists from Python 3.11 only
_SQLITE_LOCKED = 6
_SQLITE_CONSTRAINT = 19


def _code(exc: BaseException) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)  # 3.11+; the message before that
    return None if code is None else int(code) & 0xFF  # the primary code


def busy(exc: BaseException) -> bool:
    """Another connection holds the lock SQLite needs (``database is locked``)."""
    code = _code(exc)
    return code == _SQLITE_BUSY if code is not None else "database is locked" in str(exc)


def no_table(exc: BaseException) -> bool:
    """The ledger's tables are gone: the store forgot (dropped under an open ledger)."""
    return isinstance(exc, sqlite3.OperationalError) and "no such table" in str(exc)


def spoils_connection(exc: BaseException) -> bool:
    """Whether a connection that raised ``exc`` must be closed, not pooled again: any
    failure but a busy lock or a constraint (it may be read-only for good, or have hit an
    I/O error that a fresh connection sees anew)."""
    if not isinstance(exc, sqlite3.Error):
        return False
    code = _code(exc)
    if code is None:
        return not busy(exc)
    return code not in (_SQLITE_BUSY, _SQLITE_LOCKED, _SQLITE_CONSTRAINT)


def unavailable(what: str, path: str, exc: BaseException) -> LedgerUnavailable:
    return LedgerUnavailable(f"{what} SQLite ledger {path!r}: {exc}")
