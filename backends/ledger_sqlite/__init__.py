"""The embedded default: a durable SQLite file that processes on one machine share."""

from __future__ import annotations

from .backend import BACKEND
from .ledger import AsyncSQLiteLedger, SQLiteLedger

__all__ = ["BACKEND", "AsyncSQLiteLedger", "SQLiteLedger"]
