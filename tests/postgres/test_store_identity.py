"""The store forgets (issue 8, items 2 and 4): TRUNCATE, DROP and re-create, UNLOGGED.

The identity lives in the table (a genesis row) and every spend, read and listing
proves it in the same statement: a store that forgot fails closed at once, and stays
failed; a new instance gets a new ``store_id``. A table that can forget (unlogged,
temporary) or a server that can (``fsync = off``) never proves, and a ledger that
proved stops when that changes under it.
"""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest
from psycopg import sql

from ledger_core.errors import InvalidLedgerURL, LedgerError, UnsafeStoreConfig
from ledger_core.ids import MAX_MARKER_BYTES, marker_id
from ledger_core.protocol import Durability
from ledger_core.registry import open_ledger
from ledger_postgres import PostgresLedger
from tests.servers.postgres import PostgresServer

from .conftest import Opener, forgotten, host_pool_ledger


def _table(name: str) -> sql.Identifier:
    return sql.Identifier(name)


def test_truncate_fails_old_instances_and_gives_new_ones_a_new_store_id(
    open_pg: Opener, admin: psycopg.Connection[Any], table: str
) -> None:
    old = open_pg()
    assert old.spend("spent-before") is True
    before = old.store_id
    admin.execute(sql.SQL("TRUNCATE {}").format(_table(table)))
    forgotten(old)
    new = open_pg()
    assert new.store_id is not None
    assert new.store_id != before
    forgotten(old)  # stays failed, even now that the table has a genesis again
    assert new.spend("spent-before") is True  # a new store: the host asks again (H5)


def test_drop_and_recreate_by_another_instance_fails_the_old_one(
    open_pg: Opener, admin: psycopg.Connection[Any], table: str
) -> None:
    old = open_pg()
    assert old.spend("spent-before") is True
    before = old.store_id
    admin.execute(sql.SQL("DROP TABLE {}").format(_table(table)))
    new = open_pg()  # re-creates the table
    assert new.store_id not in (None, before)
    forgotten(old)


def test_truncate_on_a_host_pool(
    pg_server: PostgresServer, admin: psycopg.Connection[Any], table: str
) -> None:
    with host_pool_ledger(pg_server, table) as old:
        admin.execute(sql.SQL("TRUNCATE {}").format(_table(table)))
        forgotten(old)
        with pytest.raises(UnsafeStoreConfig):
            list(old.spent_ids())
        assert PostgresLedger.from_pool(old._pool, table=table).store_id != old.store_id


def test_listing_a_forgotten_store_raises(
    pg_server: PostgresServer, admin: Any, table: str
) -> None:
    old: Any = open_ledger(pg_server.url, table=table)
    try:
        assert old.spend("x") is True
        admin.execute(sql.SQL("TRUNCATE {}").format(_table(table)))
        with pytest.raises(UnsafeStoreConfig):
            list(old.spent_ids())
    finally:
        old.close()


def test_the_genesis_is_in_the_store_id_and_shared(open_pg: Opener) -> None:
    first, second = open_pg(), open_pg()
    assert first.store_id == second.store_id
    assert first.store_id is not None
    genesis, xmin = first.store_id.split(":")[4].split(".")
    assert len(genesis) == 36  # a UUID: a fixed form before the namespace (C7)
    assert xmin.isdigit()  # the genesis row's xmin (a restored row has another)
    assert first.describe().durability == Durability.MACHINE


def test_unlogged_table_never_proves(
    open_pg: Opener, admin: psycopg.Connection[Any], table: str
) -> None:
    open_pg().spend("made")
    admin.execute(sql.SQL("ALTER TABLE {} SET UNLOGGED").format(_table(table)))
    ledger = open_pg()
    info = ledger.describe()
    assert info.store_id is None
    assert info.reason is not None
    assert "unlogged" in info.reason
    assert info.durability == Durability.NONE
    assert ledger.spend("still-recorded") is True  # it records; it never proves


def test_table_set_unlogged_after_open_stops_a_proving_ledger(
    open_pg: Opener, admin: psycopg.Connection[Any], table: str
) -> None:
    ledger = open_pg()
    assert ledger.store_id is not None
    assert ledger.spend("before") is True
    admin.execute(sql.SQL("ALTER TABLE {} SET UNLOGGED").format(_table(table)))
    with pytest.raises(UnsafeStoreConfig):
        ledger.spend("after")
    with pytest.raises(UnsafeStoreConfig):
        ledger.spend("before")  # stays failed
    assert open_pg().store_id is None


def test_a_read_after_an_unlogged_crash_raises_rather_than_answer_false(
    pg_server: PostgresServer, admin: psycopg.Connection[Any], table: str
) -> None:
    """Reads prove the genesis only (they acknowledge nothing): the crash that empties
    an unlogged table takes the genesis row with the ids, so a ledger that proved
    raises instead of reading a spent id as not spent. It raises even before the crash:
    SET UNLOGGED rewrites the table row by row, so the genesis row has a new xmin."""
    if not pg_server.can_restart:
        pytest.skip("the server comes from LEDGER_TEST_POSTGRES_URL: it cannot be crashed here")
    ledger: Any = open_ledger(pg_server.url, table=table)
    try:
        assert ledger.store_id is not None
        assert ledger.spend("before") is True
        admin.execute(sql.SQL("ALTER TABLE {} SET UNLOGGED").format(_table(table)))
        with pytest.raises(UnsafeStoreConfig, match="reopen"):
            ledger.is_spent("before")  # nothing lost yet, but no longer the store it proved
        pg_server.stop("immediate")
        pg_server.start()
        with pytest.raises(UnsafeStoreConfig, match="reopen"):
            ledger.is_spent("before")
    finally:
        ledger.close()


def test_unlogged_table_crash_repro(
    pg_server: PostgresServer, admin: psycopg.Connection[Any], table: str
) -> None:
    """The issue's repro: SET UNLOGGED, spend, crash, start, spend again. The id is
    forgotten (PostgreSQL empties unlogged tables in crash recovery), so the store id
    reported before must have been ``None``: nothing was ever claimed."""
    if not pg_server.can_restart:
        pytest.skip("the server comes from LEDGER_TEST_POSTGRES_URL: it cannot be crashed here")
    with open_ledger(pg_server.url, table=table):  # type: ignore[attr-defined]
        pass
    admin.execute(sql.SQL("ALTER TABLE {} SET UNLOGGED").format(_table(table)))
    first: Any = open_ledger(pg_server.url, table=table)
    try:
        assert first.spend("req-42") is True
        assert first.store_id is None
    finally:
        first.close()
    pg_server.stop("immediate")
    pg_server.start()
    again: Any = open_ledger(pg_server.url, table=table)
    try:
        assert again.spend("req-42") is True  # forgotten, as PostgreSQL documents
        assert again.store_id is None
    finally:
        again.close()


def test_a_temporary_table_cannot_be_named(pg_server: PostgresServer, table: str) -> None:
    """``schema=pg_temp`` would name a session's temporary table (it forgets when the
    session ends): PostgreSQL's own schemas are refused. (A table that is temporary
    anyway would report ``store_id`` None: its persistence is checked with unlogged.)"""
    with pytest.raises(InvalidLedgerURL, match="pg_"):
        open_ledger(pg_server.url, schema="pg_temp", table=table)
    with pytest.raises(InvalidLedgerURL, match="pg_"):
        open_ledger(pg_server.url, schema="pg_catalog", table=table)


def test_create_false_on_a_missing_table_is_unavailable_and_creates_nothing(
    open_pg: Opener, admin: psycopg.Connection[Any], table: str
) -> None:
    with pytest.raises(LedgerError, match="does not exist"):
        open_pg(create="false")
    row = admin.execute("SELECT to_regclass(%s)", (table,)).fetchone()
    assert row == (None,)


def test_longest_marker_spends_and_is_never_listed(flavor: str, open_pg: Opener) -> None:
    ledger = open_pg()
    marker = marker_id("closed-proven", "x" * 1024)
    marker = marker + b"\x00" * (MAX_MARKER_BYTES - len(marker))
    assert len(marker) == MAX_MARKER_BYTES
    assert ledger.run(ledger.ledger.spend_marker(marker)) is True
    assert ledger.run(ledger.ledger.spend_marker(marker)) is False
    assert ledger.run(ledger.ledger.is_marker_spent(marker)) is True
    assert ledger.spend("plain") is True
    if flavor == "async":

        async def collect() -> list[str]:
            return [rid async for rid in ledger.ledger.spent_ids()]

        listed = ledger.run(collect())
    else:
        listed = list(ledger.ledger.spent_ids())
    assert listed == ["plain"]


def test_forget_hook_of_the_conformance_suite(pg_server: PostgresServer, table: str) -> None:
    """The conformance classes' ``ledger_forget`` (on a table of this test's own: the
    suite's final checks read the conformance table at the end of the session): old
    instances raise, new ones get a new store id."""
    from .test_conformance_postgres import forget

    old: Any = open_ledger(pg_server.url, table=table, namespace="forget-check")
    try:
        assert old.spend("a") is True
        before = old.store_id
        forget(pg_server, table)()
        with pytest.raises(UnsafeStoreConfig):
            old.spend("a")
        with open_ledger(pg_server.url, table=table, namespace="forget-check") as new:  # type: ignore[attr-defined]
            assert new.store_id not in (None, before)
            assert new.spend("a") is True
    finally:
        old.close()


def test_async_forgotten_store_raises(pg_server: PostgresServer, table: str) -> None:
    from ledger_core.registry import open_async_ledger

    async def main() -> None:
        ledger: Any = await open_async_ledger(pg_server.url, table=table)
        try:
            assert await ledger.spend("a") is True
            async with await psycopg.AsyncConnection.connect(
                pg_server.url, autocommit=True
            ) as admin:
                await admin.execute(sql.SQL("TRUNCATE {}").format(_table(table)))
            with pytest.raises(UnsafeStoreConfig):
                await ledger.is_spent("a")
            with pytest.raises(UnsafeStoreConfig):
                await ledger.spend("a")
        finally:
            await ledger.aclose()

    asyncio.run(main())
