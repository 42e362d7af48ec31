"""PostgreSQL ledgers: one unique-key INSERT per spend, with a provable store identity.

Importing this package needs no driver; opening a ledger does (psycopg 3 and
psycopg-pool: ``pip install 'decision-ledger[postgres]'``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger_core.lazy import lazy_exports

from .backend import BACKEND, require_driver, setup, setup_async

if TYPE_CHECKING:
    from .aio import AsyncPostgresLedger
    from .ledger import PostgresLedger

__all__ = ["BACKEND", "AsyncPostgresLedger", "PostgresLedger", "setup", "setup_async"]


__getattr__ = lazy_exports(
    __name__, {"PostgresLedger": ".ledger", "AsyncPostgresLedger": ".aio"}, require_driver
)
