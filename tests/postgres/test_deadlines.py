"""One deadline per call (issue 8, item 10) and cancellation (item 8)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.pq import TransactionStatus
from psycopg_pool import AsyncConnectionPool

from ledger_conformance.faults import Toxic
from ledger_core.errors import LedgerUnavailable
from ledger_postgres import AsyncPostgresLedger
from tests.servers.postgres import PostgresServer

from .conftest import Opener, proxied

SLACK = 0.5  # seconds past the timeout for the raise to travel back


@pytest.mark.parametrize("op", ["spend", "is_spent"])
def test_a_stopped_server_raises_within_the_timeout(
    op: str, open_pg: Opener, pg_server: PostgresServer
) -> None:
    """The server stops answering everything (SIGSTOP): the first attempt times out, the
    settle (or re-read) on a new connection cannot connect either; the whole call,
    reconnect included, still ends within its one timeout."""
    with proxied(pg_server) as (proxy, url):
        ledger = open_pg(url, timeout=1, pool_min=1, pool_max=1)
        assert ledger.spend("warm-up") is True
        proxy.set(Toxic.BLACKHOLE)
        started = time.monotonic()
        with pytest.raises(LedgerUnavailable):
            getattr(ledger, op)("stopped")
        took = time.monotonic() - started
        assert took < 1 + SLACK, took


def test_opening_against_a_stopped_server_raises_within_the_timeout(
    open_pg: Opener, pg_server: PostgresServer
) -> None:
    with proxied(pg_server) as (proxy, url):
        proxy.set(Toxic.BLACKHOLE)
        started = time.monotonic()
        with pytest.raises(LedgerUnavailable):
            open_pg(url, timeout=1)
        took = time.monotonic() - started
        assert took < 1 + SLACK, took


def test_cancelled_spend_disarms_and_gives_the_host_connection_back_as_it_came(
    pg_server: PostgresServer, table: str
) -> None:
    """``wait_for(spend(x), 0.3)`` while another session holds x's row lock: the
    cancelled call must leave no armed deadline (it would later shut down whatever
    socket reuses the descriptor) and hand the host's connection back unchanged."""

    async def main() -> None:
        pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            pg_server.url, min_size=1, max_size=1, open=False
        )
        await pool.open(wait=True)
        try:
            ledger = await AsyncPostgresLedger.from_pool(pool, table=table, timeout=2.5)
            insert = sql.SQL(
                "INSERT INTO {} (namespace, request_id, token) VALUES ('default', 'x', 't')"
            ).format(sql.Identifier(table))
            async with await psycopg.AsyncConnection.connect(pg_server.url) as holder:
                await holder.execute(insert)  # uncommitted: x's unique key is held
                with pytest.raises(asyncio.TimeoutError):
                    await asyncio.wait_for(ledger.spend("x"), 0.3)
                assert ledger._watchdog._armed == {}
                async with pool.connection() as conn:
                    assert conn.autocommit is False  # the host's default, as it came
                    assert conn.info.transaction_status == TransactionStatus.IDLE
                    cur = await conn.execute("SELECT 1")
                    assert await cur.fetchone() == (1,)
                    await conn.rollback()
                await holder.rollback()
            assert await ledger.spend("x") is True
            await ledger.aclose()
        finally:
            await pool.close()

    asyncio.run(main())


def test_cancelled_spend_on_the_own_pool_disarms(pg_server: PostgresServer, table: str) -> None:
    from ledger_core.registry import open_async_ledger

    async def main() -> None:
        ledger: Any = await open_async_ledger(pg_server.url, table=table, timeout=2.5, pool_max=1)
        try:
            insert = sql.SQL(
                "INSERT INTO {} (namespace, request_id, token) VALUES ('default', 'y', 't')"
            ).format(sql.Identifier(table))
            async with await psycopg.AsyncConnection.connect(pg_server.url) as holder:
                await holder.execute(insert)
                with pytest.raises(asyncio.TimeoutError):
                    await asyncio.wait_for(ledger.spend("y"), 0.3)
                assert ledger._watchdog._armed == {}
                await holder.rollback()
            assert await ledger.spend("y") is True
        finally:
            await ledger.aclose()

    asyncio.run(main())
