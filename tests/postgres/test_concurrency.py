"""C1 under contention, whatever isolation level the pool or the server defaults to."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import quote

import psycopg
import pytest
from psycopg import sql
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from ledger_core.registry import open_async_ledger, open_ledger
from ledger_postgres import AsyncPostgresLedger, PostgresLedger
from tests.servers.postgres import PostgresServer

WORKERS = 32
ROUNDS = 10
SERIALIZABLE_DEFAULT = "?options=" + quote("-c default_transaction_isolation=serializable")


def _race(spend: Callable[[str], bool], ids: list[str]) -> dict[str, list[bool]]:
    """Release WORKERS threads at once on each id; collect every answer."""
    barrier = threading.Barrier(WORKERS, timeout=30)
    results: dict[str, list[bool]] = {rid: [] for rid in ids}
    lock = threading.Lock()

    def worker() -> None:
        for rid in ids:
            barrier.wait()
            answer = spend(rid)
            with lock:
                results[rid].append(answer)

    with ThreadPoolExecutor(WORKERS) as pool:
        futures = [pool.submit(worker) for _ in range(WORKERS)]
        for future in futures:
            future.result(timeout=60)  # re-raises any worker's exception (a 40001, say)
    return results


def _one_winner_each(results: dict[str, list[bool]]) -> None:
    for rid, answers in results.items():
        assert len(answers) == WORKERS, rid
        assert answers.count(True) == 1, (rid, answers.count(True))


def test_threads_one_winner(pg_server: PostgresServer, table: str) -> None:
    ledgers = [open_ledger(pg_server.url, table=table, pool_max=8) for _ in range(4)]
    try:
        ids = [f"race-{i}" for i in range(ROUNDS)]
        counter = iter(range(10**9))

        def spend(rid: str) -> bool:
            # Four instances, so four pools: as if four processes shared the store.
            return bool(ledgers[next(counter) % 4].spend(rid))

        _one_winner_each(_race(spend, ids))
    finally:
        for ledger in ledgers:
            ledger.close()  # type: ignore[attr-defined]


def test_tasks_one_winner(pg_server: PostgresServer, table: str) -> None:
    async def main() -> None:
        ledger = await open_async_ledger(pg_server.url, table=table, pool_max=16)
        try:
            for i in range(ROUNDS):
                answers = await asyncio.gather(*(ledger.spend(f"t-{i}") for _ in range(WORKERS)))
                assert answers.count(True) == 1
        finally:
            await ledger.aclose()  # type: ignore[attr-defined]

    asyncio.run(main())


def test_raw_insert_under_serializable_does_raise_40001(
    pg_server: PostgresServer, admin: psycopg.Connection[Any], table: str
) -> None:
    """The hazard the ledger avoids, shown deterministically: a SERIALIZABLE loser gets
    40001 from ``INSERT ... ON CONFLICT DO NOTHING`` when the winner committed after
    the loser's snapshot."""
    with open_ledger(pg_server.url, table=table):  # type: ignore[attr-defined]
        pass
    insert = sql.SQL(
        "INSERT INTO {} (namespace, request_id, token) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING"
    ).format(sql.Identifier(table))
    with psycopg.connect(pg_server.url) as loser:
        loser.isolation_level = psycopg.IsolationLevel.SERIALIZABLE
        loser.execute("SELECT 1")  # the snapshot is taken here
        admin.execute(insert, (b"default", b"contested", b"w"))
        with pytest.raises(psycopg.errors.SerializationFailure):
            loser.execute(insert, (b"default", b"contested", b"l"))


def _serializable_host_session(conn: psycopg.Connection[Any]) -> None:
    conn.isolation_level = psycopg.IsolationLevel.SERIALIZABLE
    conn.row_factory = dict_row


def test_serializable_host_pool_one_winner_no_40001(pg_server: PostgresServer, table: str) -> None:
    pool: ConnectionPool[Any] = ConnectionPool(
        pg_server.url,
        configure=_serializable_host_session,
        min_size=4,
        max_size=16,
        open=True,
    )
    try:
        ledger = PostgresLedger.from_pool(pool, table=table)
        assert ledger.store_id is not None
        _one_winner_each(_race(ledger.spend, [f"ser-{i}" for i in range(ROUNDS)]))
        ledger.close()
        with pool.connection() as conn:  # the host's sessions are left as they were
            assert conn.autocommit is False
            assert conn.isolation_level == psycopg.IsolationLevel.SERIALIZABLE
            assert conn.execute("SELECT 1 AS one").fetchone() == {"one": 1}
        assert not pool.closed  # never closed by the ledger
    finally:
        pool.close()


def test_serializable_server_default_own_pool(pg_server: PostgresServer, table: str) -> None:
    ledger = open_ledger(pg_server.url + SERIALIZABLE_DEFAULT, table=table, pool_max=16)
    try:
        _one_winner_each(_race(ledger.spend, [f"srv-{i}" for i in range(ROUNDS)]))
    finally:
        ledger.close()  # type: ignore[attr-defined]


def test_serializable_server_default_async_host_pool(pg_server: PostgresServer, table: str) -> None:
    async def main() -> None:
        pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            pg_server.url + SERIALIZABLE_DEFAULT,
            kwargs={"autocommit": True},
            min_size=4,
            max_size=16,
            open=False,
        )
        await pool.open()
        try:
            ledger = await AsyncPostgresLedger.from_pool(pool, table=table)
            for i in range(ROUNDS):
                answers = await asyncio.gather(*(ledger.spend(f"as-{i}") for _ in range(WORKERS)))
                assert answers.count(True) == 1
            await ledger.aclose()
            assert not pool.closed
        finally:
            await pool.close()

    asyncio.run(main())
