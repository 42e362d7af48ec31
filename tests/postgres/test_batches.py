"""Batched spends and reads (issue 13): per-id answers, and the spend's guard kept."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from ledger_core import migrate, open_ledger
from ledger_core.errors import InvalidRequestId, UnsafeStoreConfig
from ledger_sqlite import SQLiteLedger
from tests.servers.postgres import PostgresServer

from .conftest import Opener


def test_spend_many_answers_per_id(open_pg: Opener) -> None:
    ledger = open_pg()
    assert ledger.spend("b") is True
    ids = ["a", "b", "a", "nul\x00", "é", *[f"i{n}" for n in range(2100)]]
    answers = ledger.run(ledger.ledger.spend_many(ids))
    assert answers[:5] == [True, False, False, True, True]
    assert all(answers[5:])
    assert ledger.run(ledger.ledger.spend_many(["a", "new"])) == [False, True]
    spent = ledger.run(ledger.ledger.is_spent_many(["a", "b", "nope", "i2099"]))
    assert spent == [True, True, False, True]


def test_spend_many_refuses_an_invalid_id_before_any_write(open_pg: Opener) -> None:
    ledger = open_pg()
    with pytest.raises(InvalidRequestId):
        ledger.run(ledger.ledger.spend_many(["fine", "x" * 1025]))
    assert ledger.is_spent("fine") is False


def test_spend_many_proves_the_genesis(
    open_pg: Opener, admin: psycopg.Connection[Any], table: str
) -> None:
    ledger = open_pg()
    ledger.spend("before")
    admin.execute(sql.SQL("TRUNCATE {}").format(sql.Identifier(table)))
    with pytest.raises(UnsafeStoreConfig, match="reopen"):
        ledger.run(ledger.ledger.spend_many(["x", "y"]))
    with pytest.raises(UnsafeStoreConfig, match="reopen"):
        ledger.run(ledger.ledger.is_spent_many(["x"]))
    with pytest.raises(UnsafeStoreConfig, match="reopen"):
        ledger.spend("z")  # failed closed for good


def test_spend_many_keeps_the_durability_guard(
    open_pg: Opener, admin: psycopg.Connection[Any], table: str
) -> None:
    ledger = open_pg()
    assert ledger.store_id is not None
    admin.execute(sql.SQL("ALTER TABLE {} SET UNLOGGED").format(sql.Identifier(table)))
    with pytest.raises(UnsafeStoreConfig):
        ledger.run(ledger.ledger.spend_many(["x"]))


def test_sqlite_to_postgres_and_back(pg_server: PostgresServer, tmp_path: Path, table: str) -> None:
    sqlite = SQLiteLedger(tmp_path / "old.db")
    ids = ["a", "nul\x00", *[f"i{n}" for n in range(1500)]]
    sqlite.spend_many(ids)
    pg: Any = open_ledger(pg_server.url, table=table)
    try:
        report = migrate(sqlite, pg)
        assert (report.copied, report.verified) == (len(ids), len(ids))
        back = SQLiteLedger(tmp_path / "back.db")
        assert migrate(pg, back).copied == len(ids)
        assert sorted(back.spent_ids()) == sorted(ids)
    finally:
        pg.close()
