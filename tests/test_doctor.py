"""``decision-ledger doctor URL``: every check, pass or fail, and the fix for each."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from ledger_core import LedgerUnavailable, MemoryLedger, migrate, register_backend
from ledger_core.cli import main
from ledger_core.doctor import FAIL, diagnose
from ledger_core.migrate import MigrationInterrupted, Progress
from ledger_core.opening import OpenRequest
from ledger_sqlite import SQLiteLedger

SLACK = ["--max-rtt", "600"]  # a loaded machine must not fail the round-trip check here


def _lines(out: str) -> dict[str, str]:
    """check name -> status, from the report."""
    found = {}
    for line in out.splitlines():
        status, _, rest = line.partition(" ")
        if status in ("PASS", "FAIL", "INFO"):
            found[rest.strip().split("  ")[0]] = status
    return found


def _doctor(url: str, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str]:
    """Set the store up, run the doctor on it: (exit code, its report)."""
    assert main(["setup", url]) == 0
    capsys.readouterr()
    code = main(["doctor", url, *SLACK, *extra])
    return code, capsys.readouterr().out


def test_a_healthy_sqlite_store_passes_and_nothing_is_spent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _doctor(f"sqlite:///{tmp_path}/l.db", capsys)
    assert code == 0
    checks = _lines(out)
    for name in ("identity", "durability", "configuration", "migration", "round trip"):
        assert checks[name] == "PASS", out
    assert checks["versions"] == "PASS"
    assert "every check passed" in out
    with sqlite3.connect(tmp_path / "l.db") as conn:  # no id, and no marker either
        rows = "SELECT count(*) FROM decision_ledger WHERE request_id != x''"  # but the genesis
        assert conn.execute(rows).fetchone()[0] == 0


def test_a_store_on_tmpfs_fails_with_the_fix(
    tmpfs_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmpfs_dir}/l.db"
    code, out = _doctor(url, capsys)
    assert code == 1
    checks = _lines(out)
    assert checks["identity"] == checks["durability"] == checks["configuration"] == "FAIL"
    assert "fix: put the store on a disk" in out
    assert "durability=process" in out
    assert "3 check(s) failed" in out
    # Accepting the weaker level explicitly passes, and says what was accepted.
    assert main(["doctor", f"{url}?durability=process", *SLACK]) == 0
    assert "accepted with durability=process" in capsys.readouterr().out


def test_the_memory_ledger_never_proves(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "memory://doctor", *SLACK]) == 1
    out = capsys.readouterr().out
    assert "in-process memory" in out
    checks = [c for c in diagnose(MemoryLedger()) if c.status == FAIL]
    assert {c.name for c in checks} == {"identity", "durability", "configuration"}
    assert all(c.fix for c in checks)


def test_an_incomplete_migration_fails_and_a_slow_store_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old, new = SQLiteLedger(tmp_path / "old.db"), SQLiteLedger(tmp_path / "new.db")
    old.spend_many([f"i{n}" for n in range(20)])

    def stop(p: Progress) -> None:
        raise KeyboardInterrupt

    with pytest.raises(MigrationInterrupted):
        migrate(old, new, batch=10, progress=stop)
    url = f"sqlite:///{tmp_path}/new.db"
    assert main(["doctor", url, *SLACK]) == 1
    out = capsys.readouterr().out
    assert _lines(out)["migration"] == "FAIL"
    assert "fix: run the same `decision-ledger migrate OLD NEW` again" in out
    assert main(["doctor", f"sqlite:///{tmp_path}/old.db", "--max-rtt", "0"]) == 1
    assert _lines(capsys.readouterr().out)["round trip"] == "FAIL"


class _Broken:
    """A ledger that answers reads wrongly, or cannot answer them."""

    store_id = "broken:1"

    def __init__(self, answer: object) -> None:
        self.answer = answer

    def spend(self, request_id: str) -> bool:
        return False

    def is_spent(self, request_id: str) -> bool:
        if isinstance(self.answer, Exception):
            raise self.answer
        return bool(self.answer)


class _BrokenBackend:
    def open(self, request: OpenRequest) -> _Broken:
        mode = request.url.parts.netloc
        return _Broken(LedgerUnavailable("down") if mode == "down" else True)

    async def open_async(self, request: OpenRequest) -> _Broken:
        return self.open(request)


def test_wrong_answers_fail_and_an_unavailable_store_exits_3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    register_backend("brokendoc", _BrokenBackend())  # type: ignore[arg-type]
    assert main(["doctor", "brokendoc://wrong", *SLACK]) == 1
    assert "the store answers wrongly" in capsys.readouterr().out
    assert main(["doctor", "brokendoc://down", *SLACK]) == 3
    assert "LedgerUnavailable: down" in capsys.readouterr().out
    # A missing store: the doctor says so (a failed check), never creates it.
    assert main(["doctor", f"sqlite:///{tmp_path}/missing.db"]) == 1
    assert not (tmp_path / "missing.db").exists()
