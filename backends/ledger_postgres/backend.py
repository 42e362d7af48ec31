"""``postgresql://`` and ``postgres://`` URLs -> ledgers, and the one-off ``setup``; the
driver is imported only when a URL is opened."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ledger_core.lazy import import_driver
from ledger_core.opening import OpenRequest
from ledger_core.protocol import LedgerInfo

if TYPE_CHECKING:
    from ledger_core.doctor import Check

    from .aio import AsyncPostgresLedger
    from .ledger import PostgresLedger
    from .options import Target


def require_driver() -> None:
    import_driver("postgres", "the PostgreSQL backend needs psycopg 3", "psycopg", "psycopg_pool")


class _PostgresBackend:
    testing = "ledger_postgres.testing:HOOKS"  # the suite's and the CLI's hooks

    def open(self, request: OpenRequest) -> PostgresLedger:
        target = _parse(request)
        from .ledger import PostgresLedger

        return PostgresLedger.from_target(target)

    async def open_async(self, request: OpenRequest) -> AsyncPostgresLedger:
        target = _parse(request)
        from .aio import AsyncPostgresLedger

        return await AsyncPostgresLedger.from_target(target)

    def preflight(self, request: OpenRequest) -> list[Check]:
        """``decision-ledger doctor`` on a table or namespace not set up yet."""
        target = _parse(request)
        from .ledger import PostgresLedger

        return PostgresLedger.preflight(target)

    def setup(self, request: OpenRequest) -> LedgerInfo:
        return _setup(_parse(request))


def _parse(request: OpenRequest) -> Target:
    """The driver checked first (``MissingDriver``, not an ``ImportError``), so call it
    before importing a module that imports psycopg."""
    require_driver()
    from .options import parse

    return parse(request)


BACKEND = _PostgresBackend()


def _setup(target: Target) -> LedgerInfo:
    from .ledger import PostgresLedger

    return PostgresLedger.setup_target(target).info


def setup(url_or_conninfo: str, **options: Any) -> LedgerInfo:
    """Create (or upgrade) the ledger's schema, table and genesis row, idempotently,
    and describe it. Run it as a role that may create the table, so ledgers can then
    open with ``create=false`` under one that may only INSERT and SELECT.

    ``url_or_conninfo``: a ``postgresql://`` URL or a libpq ``key=value`` string.
    """
    require_driver()
    from .options import parse_conninfo

    return _setup(parse_conninfo(url_or_conninfo, options))


async def setup_async(url_or_conninfo: str, **options: Any) -> LedgerInfo:
    """:func:`setup` without blocking the event loop."""
    import asyncio

    return await asyncio.to_thread(setup, url_or_conninfo, **options)
