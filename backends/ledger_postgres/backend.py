"""``postgresql://`` and ``postgres://`` URLs, and the one-off ``setup``.

This module imports the driver only when a URL is opened, so ``ledger_postgres``
imports (and says what to install) without psycopg.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ledger_core.errors import MissingDriver
from ledger_core.opening import OpenRequest, Route, reroute_address
from ledger_core.protocol import LedgerInfo
from ledger_core.urls import LedgerURL

if TYPE_CHECKING:
    from .aio import AsyncPostgresLedger
    from .ledger import PostgresLedger

_INSTALL = "the PostgreSQL backend needs psycopg 3: pip install 'decision-ledger[postgres]'"


def require_driver() -> None:
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError as exc:
        raise MissingDriver(_INSTALL) from exc


def _options(request: OpenRequest) -> dict[str, Any]:
    return {**request.options, "namespace": request.namespace}


class _PostgresBackend:
    def open(self, request: OpenRequest) -> PostgresLedger:
        require_driver()
        from .ledger import PostgresLedger
        from .options import target_from_url

        return PostgresLedger.from_target(target_from_url(request.url, _options(request)))

    async def open_async(self, request: OpenRequest) -> AsyncPostgresLedger:
        require_driver()
        from .aio import AsyncPostgresLedger
        from .options import target_from_url

        return await AsyncPostgresLedger.from_target(
            target_from_url(request.url, _options(request))
        )

    def setup(self, request: OpenRequest) -> LedgerInfo:
        """``decision-ledger setup``: create the table even where ledgers open with create=false."""
        return setup(request.url.raw, **_options(request))

    def reroute(self, url: LedgerURL, route: Route) -> str | None:
        return reroute_address(url, route, 5432)


BACKEND = _PostgresBackend()


def setup(url_or_conninfo: str, **options: Any) -> LedgerInfo:
    """Create the ledger's schema and table if missing (idempotent), and describe it.

    ``url_or_conninfo`` is a ``postgresql://`` URL (its query may carry ``schema``,
    ``table``, ``namespace``, ``timeout``) or a libpq ``key=value`` string; keyword
    options are the same. Run it as a role that may create the table, so ledgers can
    then open with ``create=false`` under a role that may only INSERT and SELECT.
    """
    require_driver()
    import psycopg

    from ledger_core.steps import run_steps

    from . import flows
    from .ledger import run_op
    from .options import target_from_conninfo
    from .rules import Opened, Statements

    target = target_from_conninfo(url_or_conninfo, options)
    st = Statements(target.config)
    flow = flows.open_flow(st, target.location, target.password, setup=True)

    def run(op: flows.Op) -> flows.Row:
        with psycopg.connect(target.conninfo, autocommit=True) as conn:
            return run_op(conn, op)

    opened: Opened = run_steps(flow, run)
    return opened.info


async def setup_async(url_or_conninfo: str, **options: Any) -> LedgerInfo:
    """:func:`setup` without blocking the event loop."""
    import asyncio

    return await asyncio.to_thread(setup, url_or_conninfo, **options)
