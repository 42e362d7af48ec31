"""C10 re-entry on PostgreSQL (issue 14): ``spend_as`` in one guarded statement.

The id, the C5 token and the key's digest go in one INSERT; on a conflict the same
statement answers whether the stored digest is ours. Tables made before C10 lack the
``attempt_digest`` column: create=true (or ``setup``) adds it; create=false opens and
refuses ``spend_as`` with a clear error (never a False).
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg_pool import ConnectionPool

from ledger_conformance.faults import Toxic
from ledger_core.errors import LedgerUnavailable, UnsafeStoreConfig
from ledger_core.registry import open_async_ledger, open_ledger
from ledger_postgres import PostgresLedger, setup
from tests.flavors import Flavored
from tests.servers.postgres import PostgresServer

from .conftest import Opener, on_open_links, proxied

KEY, OTHER = "attempt-key-0000-aaaa", "attempt-key-0000-bbbb"
WORKERS = 32

# The table as versions before C10 created it: no attempt_digest column.
OLD_TABLE = (
    "CREATE TABLE {} (namespace bytea NOT NULL, request_id bytea NOT NULL, "
    "token bytea NOT NULL, spent_at timestamptz NOT NULL DEFAULT statement_timestamp(), "
    "PRIMARY KEY (namespace, request_id))"
)


def spend_as(ledger: Flavored, request_id: str, key: str) -> bool:
    result: bool = ledger.run(ledger.ledger.spend_as(request_id, key))
    return result


def test_the_same_key_re_enters_and_no_other_does(open_pg: Opener) -> None:
    ledger = open_pg()
    assert spend_as(ledger, "r1", KEY) is True
    assert spend_as(ledger, "r1", KEY) is True  # the winner, retried
    assert spend_as(ledger, "r1", OTHER) is False
    assert ledger.spend("r1") is False
    assert ledger.is_spent("r1") is True
    other_ledger = open_pg()  # another process: the digest is in the store, not in memory
    assert spend_as(other_ledger, "r1", KEY) is True
    assert spend_as(other_ledger, "r1", OTHER) is False


def test_a_plain_spend_is_never_re_entered(open_pg: Opener) -> None:
    ledger = open_pg()
    assert ledger.spend("plain") is True
    assert spend_as(ledger, "plain", KEY) is False
    assert spend_as(ledger, "plain", OTHER) is False


def test_the_digest_is_stored_never_the_key(
    open_pg: Opener, admin: psycopg.Connection[Any], table: str
) -> None:
    from ledger_core.reentry import attempt_digest

    ledger = open_pg()
    assert spend_as(ledger, "stored", KEY) is True
    query = sql.SQL("SELECT attempt_digest FROM {} WHERE request_id = %s").format(
        sql.Identifier(table)
    )
    row = admin.execute(query, (b"stored",)).fetchone()
    assert row is not None
    assert bytes(row[0]) == attempt_digest(KEY)
    assert KEY.encode() not in bytes(row[0])


def test_sync_threads_with_distinct_keys_one_winner(pg_server: PostgresServer, table: str) -> None:
    ledger: Any = open_ledger(pg_server.url, table=table, pool_max=WORKERS)
    barrier = threading.Barrier(WORKERS)
    results: list[object] = [None] * WORKERS

    def work(i: int) -> None:
        barrier.wait()
        try:
            results[i] = ledger.spend_as("contested", f"thread-key-{i:04d}-xxxxxx")
        except Exception as exc:  # reported below, never a pass
            results[i] = exc

    threads = [threading.Thread(target=work, args=(i,)) for i in range(WORKERS)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert all(isinstance(r, bool) for r in results), results
        assert results.count(True) == 1, results
        winner = results.index(True)
        assert ledger.spend_as("contested", f"thread-key-{winner:04d}-xxxxxx") is True
    finally:
        ledger.close()


def test_async_tasks_with_distinct_keys_one_winner(pg_server: PostgresServer, table: str) -> None:
    async def main() -> list[object]:
        ledger: Any = await open_async_ledger(pg_server.url, table=table, pool_max=WORKERS)
        try:
            keys = [f"task-key-{i:04d}-xxxxxxx" for i in range(WORKERS)]
            results = await asyncio.gather(
                *(ledger.spend_as("contested", key) for key in keys), return_exceptions=True
            )
            if list(results).count(True) == 1:
                assert await ledger.spend_as("contested", keys[results.index(True)]) is True
            return list(results)
        finally:
            await ledger.aclose()

    results = asyncio.run(main())
    assert all(isinstance(r, bool) for r in results), results
    assert results.count(True) == 1, results


def test_a_host_pool_re_enters_in_its_framed_script(pg_server: PostgresServer, table: str) -> None:
    with ConnectionPool(pg_server.url, min_size=1, max_size=2, open=True) as pool:
        ledger = PostgresLedger.from_pool(pool, table=table)
        assert ledger.spend_as("framed", KEY) is True
        assert ledger.spend_as("framed", KEY) is True
        assert ledger.spend_as("framed", OTHER) is False
        assert ledger.spend("framed-plain") is True
        assert ledger.spend_as("framed-plain", KEY) is False
        ledger.close()


def test_a_lost_answer_is_settled_with_the_digest(
    open_pg: Opener, pg_server: PostgresServer
) -> None:
    """C5 for spend_as: the answer is lost; the settle on a new connection finds our
    token (first win), or another token with our digest (re-entry), or neither."""
    with proxied(pg_server) as (proxy, url):
        # A generous timeout: half of it is left for the settle's new connection, and
        # the pool's replacement connection must be ready for the next warm-up.
        ledger = open_pg(url, timeout=4, pool_min=1, pool_max=1)
        for n, (key, expected) in enumerate(((KEY, True), (KEY, True), (OTHER, False))):
            # The pool's one connection is live: the fault hits it, not a connect.
            assert ledger.spend(f"warm-up-{n}") is True
            with on_open_links(proxy, Toxic.DROP_REPLIES):
                # ours landed; then the same key's digest; then another key's
                assert spend_as(ledger, "lost", key) is expected
        assert proxy.stats.replies_dropped >= 3
        assert spend_as(ledger, "lost", KEY) is True


def test_a_store_that_forgot_fails_spend_as_closed(
    open_pg: Opener, admin: psycopg.Connection[Any], table: str
) -> None:
    ledger = open_pg()
    assert spend_as(ledger, "before", KEY) is True
    admin.execute(sql.SQL("TRUNCATE {}").format(sql.Identifier(table)))
    with pytest.raises(UnsafeStoreConfig, match="reopen"):
        spend_as(ledger, "before", KEY)  # the guard fails first: never a re-entry
    with pytest.raises(UnsafeStoreConfig, match="reopen"):
        spend_as(ledger, "new", KEY)


def test_an_old_table_gets_the_column_when_create_is_allowed(
    open_pg: Opener, admin: psycopg.Connection[Any], table: str
) -> None:
    admin.execute(sql.SQL(OLD_TABLE).format(sql.Identifier(table)))
    genesis = sql.SQL("INSERT INTO {} (namespace, request_id, token) VALUES (%s, '', %s)")
    admin.execute(genesis.format(sql.Identifier(table)), (b"default", uuid.uuid4().bytes))
    strict = open_pg(create=False)  # opens: spend and is_spent need nothing new
    assert strict.spend("old-style") is True
    with pytest.raises(LedgerUnavailable, match="attempt_digest"):
        spend_as(strict, "r1", KEY)
    assert strict.is_spent("r1") is False  # refused before anything was sent
    ledger = open_pg()  # create=true: ALTER TABLE ... ADD COLUMN IF NOT EXISTS
    assert spend_as(ledger, "r1", KEY) is True
    assert spend_as(ledger, "old-style", KEY) is False  # spent before: no digest
    # A ledger opened before the column existed keeps refusing (it decided at open).
    with pytest.raises(LedgerUnavailable, match="attempt_digest"):
        spend_as(strict, "r2", KEY)
    assert spend_as(open_pg(create=False), "r1", KEY) is True


def test_setup_adds_the_column_to_an_old_table(
    pg_server: PostgresServer, admin: psycopg.Connection[Any], table: str
) -> None:
    admin.execute(sql.SQL(OLD_TABLE).format(sql.Identifier(table)))
    setup(pg_server.url, table=table)
    ledger: Any = open_ledger(pg_server.url, table=table, create=False)
    try:
        assert ledger.spend_as("after-setup", KEY) is True
        assert ledger.spend_as("after-setup", OTHER) is False
    finally:
        ledger.close()


def test_a_least_privilege_role_needs_update_on_the_digest_column(
    open_pg: Opener, admin: psycopg.Connection[Any], pg_server: PostgresServer, table: str
) -> None:
    """Re-entry is ``ON CONFLICT DO UPDATE``: without UPDATE on ``attempt_digest`` it is
    refused by the server (an error, never a False); spend is unaffected."""
    setup(pg_server.url, table=table)
    name = sql.Identifier(table)
    admin.execute("DROP ROLE IF EXISTS ledger_reentry")
    admin.execute("CREATE ROLE ledger_reentry LOGIN")
    admin.execute(sql.SQL("GRANT SELECT, INSERT ON {} TO ledger_reentry").format(name))
    try:
        ledger = open_pg(pg_server.url_for(user="ledger_reentry"), create=False)
        assert ledger.spend("plain") is True
        with pytest.raises(LedgerUnavailable, match="permission"):
            spend_as(ledger, "keyed", KEY)
        admin.execute(sql.SQL("GRANT UPDATE (attempt_digest) ON {} TO ledger_reentry").format(name))
        assert spend_as(ledger, "keyed", KEY) is True
        assert spend_as(ledger, "keyed", KEY) is True
        assert spend_as(ledger, "keyed", OTHER) is False
    finally:
        admin.execute(sql.SQL("REVOKE ALL ON {} FROM ledger_reentry").format(name))
