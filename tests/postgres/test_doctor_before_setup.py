"""``decision-ledger doctor`` on a PostgreSQL table or namespace not set up yet: the
server's settings are read and judged as an open reads them, and nothing is written.

Before: exit 3 with one error line ("does not exist and create=false"), so a fresh
server could not be vetted before ``setup`` wrote to it."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from psycopg import sql

from ledger_core.cli import main
from tests.doctor_report import SLACK, parse
from tests.servers.postgres import PostgresServer

Capture = pytest.CaptureFixture[str]


def _exists(admin: psycopg.Connection[Any], table: str) -> bool:
    row = admin.execute("SELECT to_regclass(%s) IS NOT NULL", (f'"public"."{table}"',)).fetchone()
    return bool(row and row[0])


def test_a_missing_table_is_vetted_and_not_created(
    pg_server: PostgresServer, admin: psycopg.Connection[Any], table: str, capsys: Capture
) -> None:
    assert main(["doctor", f"{pg_server.url}?table={table}", *SLACK]) == 1
    out = capsys.readouterr().out
    lines = parse(out)
    assert (lines[0].status, lines[0].name) == ("FAIL", "store")
    assert f"ledger table public.{table} does not exist yet" in lines[0].detail
    assert lines[1].status == "PASS"
    assert lines[1].detail.startswith("PostgreSQL ")
    details = [(line.status, line.detail) for line in lines[2:]]
    assert ("INFO", f"table public.{table} does not exist yet: setup creates it") in details
    assert ("PASS", "fsync on") in details
    assert ("PASS", "a primary (not in recovery)") in details
    assert [status for status, _ in details].count("FAIL") == 0
    assert "1 check(s) failed" in out  # the store, and only it
    assert not _exists(admin, table)  # the doctor never creates


def test_a_missing_namespace_is_vetted_and_judges_the_table(
    pg_server: PostgresServer, admin: psycopg.Connection[Any], table: str, capsys: Capture
) -> None:
    url = f"{pg_server.url}?table={table}"
    assert main(["setup", url]) == 0
    admin.execute(sql.SQL("ALTER TABLE {} SET UNLOGGED").format(sql.Identifier(table)))
    capsys.readouterr()
    assert main(["doctor", url, "--namespace", "fresh", *SLACK]) == 1
    lines = parse(capsys.readouterr().out)
    assert "namespace 'fresh'" in lines[0].detail
    table_line = next(line for line in lines if line.detail.startswith(f"table public.{table}:"))
    assert table_line.status == "FAIL"
    assert "unlogged" in table_line.detail
    rows = admin.execute(
        sql.SQL("SELECT count(*) FROM {} WHERE namespace = 'fresh'").format(sql.Identifier(table))
    ).fetchone()
    assert rows == (0,)  # no genesis written


def test_an_unreachable_server_is_exit_3(capsys: Capture) -> None:
    assert main(["doctor", "postgresql://u:pw-secret@127.0.0.1:1/db?create=false"]) == 3
    assert "pw-secret" not in "".join(capsys.readouterr())
