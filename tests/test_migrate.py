"""Migration: nothing spent in the old store reads as unspent in the new one."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger_core import (
    MemoryLedger,
    MigrationError,
    PendingRequest,
    ResolveVerdict,
    lineage_marker,
    migrate,
    mint,
    resolve,
)
from ledger_core.cli import main
from ledger_sqlite import SQLiteLedger

IDS = ["a", "b:c", "nul\x00", "é", "x" * 1024, *[f"id-{i}" for i in range(2500)]]


def test_every_spent_id_moves_and_lineage_is_recorded(tmp_path: Path) -> None:
    old = SQLiteLedger(tmp_path / "old.db")
    for request_id in IDS:
        old.spend(request_id)
    SQLiteLedger(tmp_path / "old.db", namespace="elsewhere").spend("not-mine")
    new = SQLiteLedger(tmp_path / "new.db")
    new.spend("a")  # already there: counted, not an error

    report = migrate(old, new)

    assert (report.copied, report.already_present, report.verified) == (len(IDS) - 1, 1, len(IDS))
    assert all(new.is_spent(request_id) for request_id in IDS)
    assert new.is_spent("not-mine") is False
    assert old.store_id is not None
    assert report.lineage == old.store_id
    assert new.is_marker_spent(lineage_marker(old.store_id)) is True
    assert list(new.spent_ids()) == sorted(IDS)  # the marker is not an id
    assert report.target_store_id == new.store_id != old.store_id


def test_migrate_is_idempotent(tmp_path: Path) -> None:
    old, new = SQLiteLedger(tmp_path / "old.db"), SQLiteLedger(tmp_path / "new.db")
    old.spend("a")
    migrate(old, new)
    old.spend("late")  # spent in the old store after the first pass
    again = migrate(old, new)
    assert (again.copied, again.already_present) == (1, 1)
    assert new.is_spent("late") is True


def test_pending_requests_are_asked_again(tmp_path: Path) -> None:
    old, new = SQLiteLedger(tmp_path / "old.db"), SQLiteLedger(tmp_path / "new.db")
    pending = mint(old, "req")
    migrate(old, new)
    assert resolve(new, pending).verdict is ResolveVerdict.LEDGER_CHANGED
    assert resolve(new, PendingRequest("req", new.store_id)).may_run


def test_refuses_same_store_and_unscannable_source(tmp_path: Path) -> None:
    ledger = SQLiteLedger(tmp_path / "l.db")
    with pytest.raises(MigrationError, match="same store"):
        migrate(ledger, SQLiteLedger(tmp_path / "l.db"))

    class Opaque:
        store_id = "opaque"

        def spend(self, request_id: str) -> bool:
            return True

    with pytest.raises(MigrationError, match="spent_ids"):
        migrate(Opaque(), ledger)


def test_a_target_that_forgets_fails_verification(tmp_path: Path) -> None:
    class Forgetful(MemoryLedger):
        def is_spent(self, request_id: str) -> bool:
            return False

    old = SQLiteLedger(tmp_path / "old.db")
    old.spend("a")
    with pytest.raises(MigrationError, match="does not read as spent"):
        migrate(old, Forgetful())


def test_memory_source_has_no_lineage(tmp_path: Path) -> None:
    source = MemoryLedger()
    source.spend("a")
    report = migrate(source, SQLiteLedger(tmp_path / "new.db"))
    assert report.lineage is None
    assert report.copied == 1


def test_cli_migrate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old, new = f"sqlite:///{tmp_path}/old.db", f"sqlite:///{tmp_path}/new.db"
    assert main(["setup", old]) == 0
    assert main(["spend", old, "a"]) == 0
    assert main(["migrate", old, new]) == 0
    assert "copied 1, already present 0, verified 1" in capsys.readouterr().out
    assert main(["is-spent", new, "a"]) == 0
