"""``decision-ledger doctor`` on a PostgreSQL ledger: its versions and configuration
lines, from the facts the open decided on."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from ledger_core.doctor import FAIL, PASS
from ledger_core.protocol import LedgerInfo
from ledger_postgres.identity import Opened, Probe, ServerSettings, doctor_checks
from ledger_postgres.options import PgConfig
from ledger_postgres.statements import Guard
from tests.doctor_report import doctor, named
from tests.servers.postgres import PostgresServer


def test_a_logged_table_passes_and_an_unlogged_one_fails_its_line(
    pg_server: PostgresServer,
    admin: psycopg.Connection[Any],
    table: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = f"{pg_server.url}?table={table}"
    lines = doctor(url, capsys, setup=True)
    (versions,) = named(lines, "versions")
    assert versions.status == "PASS"
    assert versions.detail.startswith("PostgreSQL ")
    assert "psycopg " in versions.detail
    assert pg_server.password is None or pg_server.password not in "".join(map(str, lines))
    details = [(line.status, line.detail) for line in named(lines, "configuration")]
    assert details[:3] == [
        ("PASS", "fsync on"),
        ("PASS", f"table public.{table} is permanent (logged)"),
        ("PASS", "a primary (not in recovery)"),
    ]
    assert details[3][1].startswith("synchronous_commit on for every spend")
    assert details[4][0] == "INFO"
    assert details[4][1].startswith("full_page_writes ")
    admin.execute(f"ALTER TABLE {table} SET UNLOGGED")
    lines = doctor(url, capsys)
    table_line = named(lines, "configuration")[1]
    assert table_line.status == "FAIL"
    assert table_line.detail.startswith(f"table public.{table}: the ledger table is unlogged")


def _opened(probe: Probe, store_id: str | None) -> Opened:
    info = LedgerInfo(backend="postgres", store_id=store_id, reason=None if store_id else "x")
    return Opened(info, Guard(b"default", b"g" * 16, 1, True), True, probe)


@pytest.mark.parametrize(("number", "status"), [(90524, FAIL), (90600, PASS), (150004, PASS)])
def test_the_version_is_judged_against_what_the_statements_need(number: int, status: str) -> None:
    probe = Probe("on", False, 1, 2, True, "p", True)
    settings = ServerSettings("x", number, "on", "on")
    checks = doctor_checks(_opened(probe, "postgres:1"), settings, PgConfig(), "3.2.0", 160000)
    assert checks[0].status == status
    assert "libpq 16.0" in checks[0].detail


def test_fsync_off_fails_its_line() -> None:
    probe = Probe("off", False, 1, 2, True, "p", True)
    settings = ServerSettings("15.4", 150004, "on", "on")
    checks = doctor_checks(_opened(probe, None), settings, PgConfig(), "3.2.0", 150004)
    assert (checks[1].status, checks[1].detail.split(":")[0]) == (
        FAIL,
        "fsync is off on this server",
    )
    assert [c.status for c in checks[1:]].count(FAIL) == 1
