"""PostgreSQL ledgers: one unique-key INSERT per spend, with a provable store identity.

Importing this package needs no driver; opening a ledger does (psycopg 3 and
psycopg-pool: ``pip install 'decision-ledger[postgres]'``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .backend import BACKEND, setup, setup_async

if TYPE_CHECKING:
    from .aio import AsyncPostgresLedger
    from .ledger import PostgresLedger

__all__ = ["BACKEND", "AsyncPostgresLedger", "PostgresLedger", "setup", "setup_async"]


def __getattr__(name: str) -> Any:
    """Load the ledger classes (and the driver) only when asked for."""
    if name in ("PostgresLedger", "AsyncPostgresLedger"):
        from .backend import require_driver

        require_driver()
        from . import aio, ledger

        return getattr(ledger if name == "PostgresLedger" else aio, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
