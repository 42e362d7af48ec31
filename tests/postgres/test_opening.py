"""Opening is explicit (issue 37): ``create=false`` refuses a namespace without its
genesis row exactly as a missing table, and creates nothing (the CLI's reads and a
migration's source open that way); ``create=true`` that makes a namespace says so once."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from psycopg import sql

from ledger_core.cli import main
from ledger_core.errors import LedgerUnavailable
from tests.servers.postgres import PostgresServer

from .conftest import Opener


def _rows(admin: psycopg.Connection[Any], table: str, namespace: str) -> int:
    query = sql.SQL("SELECT count(*) FROM {} WHERE namespace = %s").format(sql.Identifier(table))
    row = admin.execute(query, (namespace.encode(),)).fetchone()
    assert row is not None
    return int(row[0])


def test_create_false_refuses_a_missing_namespace_and_creates_nothing(
    open_pg: Opener, admin: psycopg.Connection[Any], table: str
) -> None:
    assert open_pg().spend("a-1") is True  # the table and namespace 'default' exist
    for _ in range(2):  # nothing was created: the second open refuses too
        with pytest.raises(LedgerUnavailable, match="setup URL --namespace defualt"):
            open_pg(namespace="defualt", create=False)
    assert _rows(admin, table, "defualt") == 0
    with pytest.raises(LedgerUnavailable, match="does not exist and create=false"):
        open_pg(namespace="typo", create="false")
    assert _rows(admin, table, "typo") == 0


@pytest.fixture
def url(pg_server: PostgresServer, table: str) -> str:
    """The test's own table, as a CLI user names it."""
    return f"{pg_server.url}?table={table}"


@pytest.mark.parametrize("command", ["is-spent", "store-id", "doctor", "lineage", "migrate"])
def test_cli_never_creates_a_mistyped_namespace(
    command: str, url: str, admin: psycopg.Connection[Any], table: str, capsys: Any
) -> None:
    assert main(["spend", url, "a-1"]) == 3  # the table does not exist yet: reads refuse
    assert main(["setup", url]) == 0
    assert main(["spend", url, "a-1"]) == 0
    capsys.readouterr()
    typo = f"{url}&namespace=defualt"
    args = {
        "is-spent": [typo, "a-1"],
        "store-id": [typo],
        "doctor": [typo],
        "lineage": [typo],
        "migrate": [typo, f"{url}&namespace=target"],
    }[command]
    # doctor answers: a failed "store" line saying what setup would create (exit 1)
    assert main([command, *args]) == (1 if command == "doctor" else 3)
    said = capsys.readouterr()
    err = said.out + said.err if command == "doctor" else said.err
    assert "namespace 'defualt'" in err
    assert "--namespace defualt" in err
    assert _rows(admin, table, "defualt") == 0
    assert _rows(admin, table, "target") == 0  # a migration whose source is missing


def test_an_open_that_creates_a_namespace_says_so_once(
    open_pg: Opener, caplog: pytest.LogCaptureFixture
) -> None:
    open_pg(namespace="kept")
    caplog.clear()
    open_pg(namespace="kept")
    open_pg(namespace="fresh")
    open_pg(namespace="fresh")
    said = [r.getMessage() for r in caplog.records if r.name == "decision_ledger"]
    created = [m for m in said if "new ledger: created an empty store" in m]
    assert len(created) == 1, said
    assert "(namespace 'fresh')" in created[0]
