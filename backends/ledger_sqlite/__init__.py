"""The embedded default: a durable SQLite file that processes on one machine share."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .backend import BACKEND

if TYPE_CHECKING:
    from .aio import AsyncSQLiteLedger
    from .ledger import SQLiteLedger

__all__ = ["BACKEND", "AsyncSQLiteLedger", "SQLiteLedger"]


def __getattr__(name: str) -> Any:
    if name == "SQLiteLedger":
        from .ledger import SQLiteLedger

        return SQLiteLedger
    if name == "AsyncSQLiteLedger":
        from .aio import AsyncSQLiteLedger

        return AsyncSQLiteLedger
    raise AttributeError(name)
