"""The conformance suite against PostgreSQL, sync and async, through the fault proxy.

Two configurations: a ledger opened from a URL (its own pool, sessions set up once),
and a ledger on a pool the host owns whose sessions default to SERIALIZABLE (each
operation framed in its own READ COMMITTED transaction). Store labels are namespaces
of one table; the restart hook is an immediate shutdown (a crash) and a start; the
forget hook is a ``TRUNCATE`` of that table (every namespace, and the genesis row).
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from ledger_conformance import LedgerConformance, LedgerContext, create_option, offers_create
from ledger_conformance.context import identity_route
from ledger_core.registry import open_async_ledger, open_ledger
from ledger_postgres import AsyncPostgresLedger, PostgresLedger
from tests.restoring import AfterRestore
from tests.servers.postgres import PostgresServer

TABLE = "conformance"
TIMEOUT = 2.0  # seconds per operation: faults end in a raise quickly
# With no fault proxy in the path nothing needs to end quickly: a loaded two-core machine
# stalled a re-read past 2 s (1 in 10,000, after the meta-test), which is not a fault.
CALM_TIMEOUT = 10.0


def _timeout(ctx: LedgerContext) -> float:
    return CALM_TIMEOUT if ctx.route is identity_route else TIMEOUT


Address = tuple[str, int, str, str]  # host, port, user, dbname


def _address(server: PostgresServer) -> Address:
    return server.host, server.port, server.user, server.dbname


def _routed_url(address: Address, ctx: LedgerContext) -> str:
    host, port, user, dbname = address
    routed_host, routed_port = ctx.route(host, port)
    return f"postgresql://{user}@{routed_host}:{routed_port}/{dbname}"


def open_url(address: Address, ctx: LedgerContext) -> Any:
    """The URL factory, given the server's address: module-level, so a freshly spawned
    interpreter rebuilds it (``functools.partial`` pickles by name)."""
    url = _routed_url(address, ctx)
    options: dict[str, Any] = {"namespace": ctx.store, "table": TABLE, "timeout": _timeout(ctx)}
    options.update(create_option(ctx))
    if ctx.flavor == "async":
        return open_async_ledger(url, **options)
    return open_ledger(url, **options)


def url_factory(address: Address) -> Any:
    return offers_create(functools.partial(open_url, address))


def _restart(server: PostgresServer) -> Callable[[], None]:
    if not server.can_restart:
        pytest.skip("the server comes from LEDGER_TEST_POSTGRES_URL: no restart hook")
    return lambda: server.restart("immediate")


def forget(server: PostgresServer, table: str = TABLE) -> Callable[..., None]:
    """Make the store under test forget everything: TRUNCATE its table. Ledgers opened
    before must fail closed from then on; ones opened after get a new store_id. Told a
    namespace (the store label: our factories' namespace), delete that namespace's rows."""

    def truncate(namespace: str | None = None) -> None:
        with psycopg.connect(server.url, autocommit=True) as admin:
            admin.execute("SET lock_timeout = '10s'")
            if namespace is None:
                admin.execute(sql.SQL("TRUNCATE {}").format(sql.Identifier(table)))
            else:
                delete = sql.SQL("DELETE FROM {} WHERE namespace = %s")
                admin.execute(delete.format(sql.Identifier(table)), (namespace.encode(),))

    return truncate


class Restore:
    """The suite's restore hook, as a restore of a ``pg_dump --data-only`` of the table
    does: the snapshot is the namespace's rows (every row when told none); the restore,
    in one transaction, deletes the namespace's rows (``TRUNCATE`` for the whole table)
    and inserts the snapshot again (``COPY``)."""

    def __init__(self, server: PostgresServer, table: str = TABLE) -> None:
        self.server, self.table = server, sql.Identifier(table)
        self.columns: list[str] = []
        self.rows: list[tuple[Any, ...]] = []

    def __call__(self, phase: str, namespace: str | None = None) -> None:
        where = sql.SQL("" if namespace is None else " WHERE namespace = %s")
        params = None if namespace is None else (namespace.encode(),)
        with psycopg.connect(self.server.url) as conn:
            conn.execute("SET lock_timeout = '10s'")
            if phase == "snapshot":
                cur = conn.execute(sql.SQL("SELECT * FROM {}{}").format(self.table, where), params)
                self.columns = [column.name for column in cur.description or ()]
                self.rows = cur.fetchall()
                return
            empty = sql.SQL("TRUNCATE {}" if namespace is None else "DELETE FROM {}{}")
            conn.execute(empty.format(self.table, where), params)
            names = sql.SQL(", ").join(map(sql.Identifier, self.columns))
            copy = sql.SQL("COPY {} ({}) FROM STDIN").format(self.table, names)
            with conn.cursor().copy(copy) as rows:
                for row in self.rows:
                    rows.write_row(row)


class _Restores(LedgerConformance):
    """A namespace's rows restored in one transaction, then reidentified."""

    @pytest.fixture
    def ledger_restore(self, pg_server: PostgresServer) -> Restore:
        return Restore(pg_server)

    @pytest.fixture
    def ledger_after_restore(self, pg_server: PostgresServer) -> AfterRestore:
        return AfterRestore(pg_server.url, options={"table": TABLE})


class TestPostgresURL(_Restores):
    """``open_ledger("postgresql://...")``: the ledger owns its pool."""

    @pytest.fixture
    def ledger_factory(self, pg_server: PostgresServer) -> Any:
        return url_factory(_address(pg_server))

    @pytest.fixture
    def ledger_restart(self, pg_server: PostgresServer) -> Callable[[], None]:
        return _restart(pg_server)

    @pytest.fixture
    def ledger_forget(self, pg_server: PostgresServer) -> Callable[..., None]:
        return forget(pg_server)


def _serializable(conn: psycopg.Connection[Any]) -> None:
    conn.isolation_level = psycopg.IsolationLevel.SERIALIZABLE


async def _aserializable(conn: psycopg.AsyncConnection[Any]) -> None:
    await conn.set_isolation_level(psycopg.IsolationLevel.SERIALIZABLE)


@contextmanager
def _sync_pool_ledger(url: str, timeout: float, options: dict[str, Any]) -> Iterator[Any]:
    with (
        ConnectionPool(
            url, configure=_serializable, min_size=1, max_size=8, timeout=timeout
        ) as pool,
        PostgresLedger.from_pool(pool, **options) as ledger,
    ):
        yield ledger


@asynccontextmanager
async def _async_pool_ledger(
    url: str, timeout: float, options: dict[str, Any]
) -> AsyncIterator[Any]:
    async with AsyncConnectionPool(
        url, configure=_aserializable, min_size=1, max_size=8, timeout=timeout
    ) as pool:
        ledger = await AsyncPostgresLedger.from_pool(pool, **options)
        async with ledger:
            yield ledger


def open_host_pool(address: Address, ctx: LedgerContext) -> Any:
    """The host-pool factory, given the server's address: module-level, like
    ``open_url``, so the spawned-interpreter axes reach this configuration too."""
    url = _routed_url(address, ctx)
    timeout = _timeout(ctx)
    options: dict[str, Any] = {"namespace": ctx.store, "table": TABLE, "timeout": timeout}
    options.update(create_option(ctx))
    if ctx.flavor == "async":
        return _async_pool_ledger(url, timeout, options)
    return _sync_pool_ledger(url, timeout, options)


def host_pool_factory(address: Address) -> Any:
    return offers_create(functools.partial(open_host_pool, address))


class TestPostgresHostPool(_Restores):
    """``from_pool`` on the host's pool, whose sessions default to SERIALIZABLE."""

    @pytest.fixture
    def ledger_factory(self, pg_server: PostgresServer) -> Any:
        return host_pool_factory(_address(pg_server))

    @pytest.fixture
    def ledger_restart(self, pg_server: PostgresServer) -> Callable[[], None]:
        return _restart(pg_server)

    @pytest.fixture
    def ledger_forget(self, pg_server: PostgresServer) -> Callable[..., None]:
        return forget(pg_server)
