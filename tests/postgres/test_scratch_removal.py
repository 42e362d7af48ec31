"""PostgreSQL's ``remove_scratch`` hook: one DELETE of a bytea range; the table's
genesis row and every other namespace stay; a missing table is never created."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from ledger_core.errors import LedgerUnavailable
from tests.scratch_removal import exercise, new_prefix, refuses, remove
from tests.servers.postgres import PostgresServer


def _url(server: PostgresServer, table: str) -> str:
    joiner = "&" if "?" in server.url else "?"
    return f"{server.url}{joiner}table={table}"


def test_removes_exactly_the_scratch_namespaces(pg_server: PostgresServer, table: str) -> None:
    exercise(_url(pg_server, table))


def test_refuses_any_other_prefix(pg_server: PostgresServer, table: str) -> None:
    refuses(_url(pg_server, table))


def test_never_creates_the_table(
    pg_server: PostgresServer, table: str, admin: psycopg.Connection[Any]
) -> None:
    with pytest.raises(LedgerUnavailable, match="does not exist and create=false"):
        remove(_url(pg_server, table), new_prefix())
    found = admin.execute("SELECT to_regclass(%s)", (table,)).fetchone()
    assert found == (None,)
