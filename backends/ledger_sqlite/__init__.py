"""The embedded default: a durable SQLite file that processes on one machine share."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger_core.lazy import lazy_exports

from .backend import BACKEND

if TYPE_CHECKING:
    from .aio import AsyncSQLiteLedger
    from .ledger import SQLiteLedger

__all__ = ["BACKEND", "AsyncSQLiteLedger", "SQLiteLedger"]


__getattr__ = lazy_exports(__name__, {"SQLiteLedger": ".ledger", "AsyncSQLiteLedger": ".aio"})
