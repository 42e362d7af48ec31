"""``decision-ledger doctor`` on a SQLite ledger: its versions and configuration lines."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from ledger_core.doctor import FAIL, INFO, PASS
from ledger_core.protocol import LedgerInfo
from ledger_sqlite import SQLiteLedger
from ledger_sqlite.identity import SQLITE_MINIMUM, doctor_checks
from tests.doctor_report import doctor, named

PROVES = LedgerInfo(backend="sqlite", store_id="sqlite:x:default")


def test_a_file_on_disk_shows_each_setting_and_passes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = doctor(f"sqlite:///{tmp_path}/l.db", capsys, setup=True)
    (versions,) = named(lines, "versions")
    assert versions.status == PASS.upper()
    assert f"SQLite library {sqlite3.sqlite_version} (>= 3.35.0" in versions.detail
    details = [line.detail for line in named(lines, "configuration")]
    assert details[0] == "journal_mode wal (verified on every connection)"
    assert details[1].startswith("synchronous FULL")
    assert details[2].startswith("filesystem ")
    assert all(line.status == "PASS" for line in named(lines, "configuration"))


def test_a_file_on_tmpfs_fails_its_filesystem_line_unless_accepted(
    tmpfs_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmpfs_dir}/l.db"
    lines = doctor(url, capsys, setup=True)
    (failed,) = [line for line in named(lines, "configuration") if line.status == "FAIL"]
    assert failed.detail.startswith("filesystem tmpfs: the file is on tmpfs")
    lines = doctor(f"{url}?durability=process", capsys)
    assert named(lines, "configuration")[-1].detail == (
        "filesystem tmpfs, accepted with durability=process"
    )


def test_the_pragmas_are_read_again_not_assumed(tmp_path: Path) -> None:
    """A connection whose level was lowered behind the ledger's back shows it (the
    doctor re-reads what the connection says)."""
    ledger = SQLiteLedger(tmp_path / "l.db")
    try:
        conn = ledger._conns.idle.get_nowait()
        conn.execute("PRAGMA synchronous=OFF")
        ledger._conns.idle.put(conn)
        checks = ledger.doctor_checks()
    finally:
        ledger.close()
    assert [c.status for c in checks if c.detail.startswith("synchronous")] == [FAIL]
    assert "synchronous OFF" in " ".join(c.detail for c in checks)


@pytest.mark.parametrize(
    ("library", "status"), [("3.34.1", FAIL), ("3.35.0", PASS), ("3.46.1", PASS), ("", INFO)]
)
def test_the_library_version_is_judged_against_returning(library: str, status: str) -> None:
    checks = doctor_checks(PROVES, "ext4", "wal", 2, library, "3.11.7")
    assert checks[0].name == "versions"
    assert checks[0].status == status
    if status == FAIL:
        assert checks[0].fix == "upgrade the server to 3.35.0 or later"
        assert "RETURNING" in checks[0].detail
    assert SQLITE_MINIMUM == (3, 35, 0)


def test_unknown_filesystem_is_info_and_a_refusal_always_fails_a_line() -> None:
    checks = doctor_checks(PROVES, None, "wal", 2, "3.40.1", "3.11.7")
    assert checks[-1].status == INFO
    refused = LedgerInfo(backend="sqlite", store_id=None, reason="some other reason")
    checks = doctor_checks(refused, "ext4", "wal", 2, "3.40.1", "3.11.7")
    assert checks[-1].status == FAIL
    assert checks[-1].detail == "some other reason"
