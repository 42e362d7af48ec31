"""PostgreSQL: the ledger on its own pool against ``INSERT ... ON CONFLICT DO NOTHING``
sent through that same pool (so both sides get the same sessions and connections), and
(sync modes) against the same statement a host writes by hand on plain connections of
its own: one per thread, opened before timing, no pool.

The server is the harness's (``initdb`` on a free port, default settings: every commit
waits for the disk), or the URL given. Raw rows go to the ledger's table under their own
namespace, so both sides write into the same index. Preloading uses ``COPY``.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack, asynccontextmanager, contextmanager
from typing import Any

from psycopg import sql

from bench.measure import PEER, AsyncContender, Contender, async_pair, ops, pair
from bench.stores import Subject, chunks, versions
from ledger_core import open_async_ledger, open_ledger
from ledger_core.opening import OpenRequest
from tests.servers import postgres as servers

NAME = "postgres"
SCHEMES = ("postgresql", "postgres")

UNAVAILABLE = servers.ServerUnavailable
RAW_CALLS = "INSERT ON CONFLICT / SELECT"
TABLE = "bench_ledger"
POOL = 32
RAW_NAMESPACE = b"raw"
PLAIN_NAMESPACE = b"plain"


@contextmanager
def server() -> Iterator[str]:
    with servers.postgres_server() as found:
        yield found.url + "?sslmode=disable"  # the ledger, not TLS, is measured


def statements(name: sql.Identifier) -> tuple[sql.Composed, sql.Composed]:
    insert = sql.SQL(
        "INSERT INTO {} (namespace, request_id, token) VALUES (%s, %s, %s) "
        "ON CONFLICT (namespace, request_id) DO NOTHING"
    ).format(name)
    select = sql.SQL("SELECT true FROM {} WHERE namespace = %s AND request_id = %s").format(name)
    return insert, select


def pool_of(ledger: Any) -> Any:
    """The ledger's own pool: the raw call must borrow the very same connections."""
    pool = getattr(ledger, "_pool", None)
    if pool is None:
        raise SystemExit("the PostgreSQL ledger no longer keeps its pool in _pool: update bench")
    return pool


def subject(url: str, stack: ExitStack) -> Subject:
    given = OpenRequest.build(url).options
    options = {"table": given.get("table", TABLE), "pool_max": given.get("pool_max", POOL)}
    schema = given.get("schema")
    table = sql.Identifier(*([schema] if schema else []), options["table"])
    ledger: Any = open_ledger(url, **options)
    stack.callback(ledger.close)
    insert, select = statements(table)
    pool = pool_of(ledger)

    def raw_spend(rid: str) -> object:
        with pool.connection() as conn:
            done = conn.execute(insert, (RAW_NAMESPACE, rid.encode(), os.urandom(16)))
            if not conn.autocommit:
                conn.commit()
            return done.rowcount == 1

    def raw_is_spent(rid: str) -> object:
        with pool.connection() as conn:
            row = conn.execute(select, (RAW_NAMESPACE, rid.encode())).fetchone()
            if not conn.autocommit:
                conn.commit()
            return row is not None

    def preload(numbers: range) -> None:
        copy = sql.SQL("COPY {} (namespace, request_id, token) FROM STDIN").format(table)
        with pool.connection() as conn:
            for part in chunks(len(numbers), 50_000):
                with conn.transaction(), conn.cursor() as cur, cur.copy(copy) as sink:
                    for i in part:
                        sink.write_row((b"pre", f"pre-{numbers[i]}".encode(), b"t" * 16))

    @asynccontextmanager
    async def open_async() -> AsyncIterator[list[AsyncContender]]:
        aledger: Any = await open_async_ledger(url, **options)
        apool = pool_of(aledger)

        async def araw_spend(rid: str) -> object:
            async with apool.connection() as conn:
                done = await conn.execute(insert, (RAW_NAMESPACE, rid.encode(), os.urandom(16)))
                if not conn.autocommit:
                    await conn.commit()
                return done.rowcount == 1

        async def araw_is_spent(rid: str) -> object:
            async with apool.connection() as conn:
                row = await (await conn.execute(select, (RAW_NAMESPACE, rid.encode()))).fetchone()
                if not conn.autocommit:
                    await conn.commit()
                return row is not None

        try:
            yield async_pair(aledger, RAW_CALLS, araw_spend, araw_is_spent)
        finally:
            await aledger.aclose()

    plain = _plain(url, options, table, stack)
    with pool.connection() as conn:
        row = conn.execute("SHOW server_version").fetchone()
        fsync = conn.execute("SHOW fsync").fetchone()
        commit = conn.execute("SHOW synchronous_commit").fetchone()
    return Subject(
        NAME,
        f"PostgreSQL {row[0] if row else '?'} (fsync {fsync[0] if fsync else '?'}, "
        f"synchronous_commit {commit[0] if commit else '?'}, pool of {options.get('pool_max')})",
        [*pair(ledger, RAW_CALLS, raw_spend, raw_is_spent), plain],
        preload,
        open_async,
        versions("psycopg", "psycopg-pool"),
    )


def _plain(url: str, options: dict[str, Any], table: sql.Identifier, stack: ExitStack) -> Contender:
    """The hand-written call on plain autocommit connections (psycopg prepares it after
    five runs, as it does by default), one per worker: a free list, never waited on."""
    import psycopg

    from ledger_postgres.options import OPTIONS

    driver_url = OpenRequest.build(url).driver_url(OPTIONS)
    free = [psycopg.connect(driver_url, autocommit=True) for _ in range(int(options["pool_max"]))]
    for conn in free:
        stack.callback(conn.close)
    insert, select = statements(table)

    def spend(rid: str) -> object:
        conn = free.pop()  # atomic under the GIL; as many connections as workers
        try:
            return (
                conn.execute(insert, (PLAIN_NAMESPACE, rid.encode(), os.urandom(16))).rowcount == 1
            )
        finally:
            free.append(conn)

    def is_spent(rid: str) -> object:
        conn = free.pop()
        try:
            return conn.execute(select, (PLAIN_NAMESPACE, rid.encode())).fetchone() is not None
        finally:
            free.append(conn)

    return Contender("INSERT / SELECT, plain connection", PEER, ops(spend, is_spent))
