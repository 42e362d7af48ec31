"""Migration: nothing spent in the old store reads as unspent in the new one."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger_core import (
    InvalidRequestId,
    MemoryLedger,
    MigrationError,
    PendingRequest,
    ResolveVerdict,
    UnsafeStoreConfig,
    lineage_marker,
    migrate,
    mint,
    resolve,
)
from ledger_core.cli import main
from ledger_core.migrate import MigrationInterrupted, Progress, migration_state
from ledger_sqlite import SQLiteLedger
from tests.cli_stops import press_ctrl_c_after

IDS = ["a", "b:c", "nul\x00", "é", "x" * 1024, *[f"id-{i}" for i in range(2500)]]


def test_every_spent_id_moves_and_lineage_is_recorded(tmp_path: Path) -> None:
    old = SQLiteLedger(tmp_path / "old.db")
    for request_id in IDS:
        old.spend(request_id)
    SQLiteLedger(tmp_path / "old.db", namespace="elsewhere").spend("not-mine")
    new = SQLiteLedger(tmp_path / "new.db")
    new.spend("a")  # already there: counted, not an error (a merge the user asked for)

    report = migrate(old, new, merge=True)

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
    assert resolve(new, pending, approved=True).verdict is ResolveVerdict.LEDGER_CHANGED
    assert resolve(new, PendingRequest("req", new.store_id), approved=True).may_run


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


def test_a_target_with_other_spends_is_refused_unless_merge(tmp_path: Path) -> None:
    old, new = SQLiteLedger(tmp_path / "old.db"), SQLiteLedger(tmp_path / "new.db")
    old.spend("a")
    new.spend("someone-else")
    with pytest.raises(MigrationError, match="merge"):
        migrate(old, new)
    assert new.is_spent("a") is False  # refused before writing anything
    assert migrate(old, new, merge=True).copied == 1


def _interrupt_after(batches: int) -> object:
    seen: list[Progress] = []

    def progress(p: Progress) -> None:
        seen.append(p)
        if len(seen) == batches:
            raise KeyboardInterrupt

    return progress


def test_interrupted_target_is_incomplete_and_a_rerun_resumes(tmp_path: Path) -> None:
    old, new = SQLiteLedger(tmp_path / "old.db"), SQLiteLedger(tmp_path / "new.db")
    ids = [f"id-{i:05d}" for i in range(2500)]
    assert old.spend_many(ids) == [True] * len(ids)
    with pytest.raises(MigrationInterrupted) as stopped:
        migrate(old, new, batch=1000, progress=_interrupt_after(1))  # type: ignore[arg-type]
    assert stopped.value.progress.done == 1000
    assert stopped.value.progress.last_id == "id-00999"
    assert migration_state(new) is not None
    assert "incomplete" in str(migration_state(new))
    assert old.store_id is not None
    assert new.is_marker_spent(lineage_marker(old.store_id)) is False  # not done: no lineage
    # An id spent in the old store meanwhile, BEFORE the stopping point in byte order.
    old.spend("id-00000-late")
    report = migrate(old, new, batch=1000)  # not a merge: it resumes its own run
    assert report.resumed
    assert report.run == 1
    assert (report.copied, report.already_present) == (1501, 1000)
    assert migration_state(new) is None
    assert sorted(new.spent_ids()) == sorted([*ids, "id-00000-late"])


def test_a_catch_up_run_after_the_switch_is_no_merge(tmp_path: Path) -> None:
    old, new = SQLiteLedger(tmp_path / "old.db"), SQLiteLedger(tmp_path / "new.db")
    old.spend("a")
    migrate(old, new)
    new.spend("host-spent-in-new")  # hosts switched
    old.spend("late")
    report = migrate(old, new)
    assert (report.copied, report.run) == (1, 2)


def test_progress_is_reported_per_batch(tmp_path: Path) -> None:
    old, new = SQLiteLedger(tmp_path / "old.db"), SQLiteLedger(tmp_path / "new.db")
    old.spend_many([f"i{n}" for n in range(250)])
    seen: list[Progress] = []
    migrate(old, new, batch=100, progress=seen.append)
    assert [p.done for p in seen] == [100, 200, 250]
    assert seen[-1].copied == 250
    assert seen[-1].rate > 0


def test_sqlite_spend_many_answers_per_id(tmp_path: Path) -> None:
    ledger = SQLiteLedger(tmp_path / "l.db")
    ledger.spend("b")
    assert ledger.spend_many(["a", "b", "a", "c"]) == [True, False, False, True]
    assert ledger.is_spent_many(["a", "b", "c", "d"]) == [True, True, True, False]
    with pytest.raises(InvalidRequestId):
        ledger.spend_many(["ok", ""])
    assert ledger.is_spent("ok") is False  # an invalid id refuses the whole batch first


def test_cli_store_id_shows_an_incomplete_migration(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old, new = SQLiteLedger(tmp_path / "old.db"), SQLiteLedger(tmp_path / "new.db")
    old.spend_many([f"i{n}" for n in range(20)])
    with pytest.raises(MigrationInterrupted):
        migrate(old, new, batch=10, progress=_interrupt_after(1))  # type: ignore[arg-type]
    capsys.readouterr()
    # Before: the id printed and exit 1 ("no store id"); now a refusal, as for any read.
    assert main(["store-id", f"sqlite:///{tmp_path}/new.db"]) == 3
    out, err = capsys.readouterr()
    assert out == ""
    assert "incomplete migration" in err


def test_cli_lineage(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old, new = f"sqlite:///{tmp_path}/old.db", f"sqlite:///{tmp_path}/new.db"
    assert main(["setup", old]) == 0
    assert main(["setup", new]) == 0
    capsys.readouterr()
    assert main(["lineage", new]) == 0
    assert "never migrated into" in capsys.readouterr().out
    assert main(["migrate", old, new]) == 0
    capsys.readouterr()
    assert main(["lineage", new]) == 0
    assert (
        capsys.readouterr().out == f"migrated-from {SQLiteLedger(tmp_path / 'old.db').store_id}\n"
    )


def test_cli_lineage_says_what_it_cannot_do(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lineage", "memory://x"]) == 1
    assert "cannot list its markers" in capsys.readouterr().err


def test_cli_refuses_a_silent_merge_and_merges_when_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old, new = f"sqlite:///{tmp_path}/old.db", f"sqlite:///{tmp_path}/new.db"
    for url, rid in ((old, "a"), (new, "b")):
        assert main(["setup", url]) == 0
        assert main(["spend", url, rid]) == 0
    assert main(["migrate", old, new]) == 3
    assert "--merge" in capsys.readouterr().err
    assert main(["migrate", old, new, "--merge"]) == 0


def test_cli_progress_lines_and_ctrl_c(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not a terminal: plain lines; Ctrl-C: where it stopped and the resuming command."""
    from ledger_core import cli

    source = SQLiteLedger(tmp_path / "old.db")
    source.spend_many([f"i{n:05d}" for n in range(3000)])
    old, new = f"sqlite:///{tmp_path}/old.db", f"sqlite:///{tmp_path}/new.db"
    monkeypatch.setattr(cli._Meter, "EVERY", 0.0)  # a line per batch
    real = cli._Meter.__call__
    press_ctrl_c_after(monkeypatch, 2)
    assert main(["migrate", old, new, "--target-namespace", "n s"]) == 130
    err = capsys.readouterr().err
    assert "1,000 of 3,000 ids (1,000 copied)" in err
    assert "ETA" in err
    assert "interrupted after 2000 ids (last: 'i01999')" in err
    # The command alone on its line: pasted whole, it runs.
    assert f"decision-ledger migrate {old} {new} --target-namespace 'n s'" in err.splitlines()
    monkeypatch.setattr(cli._Meter, "__call__", real)
    assert main(["migrate", old, new, "--target-namespace", "n s"]) == 0
    assert "copied 1000, already present 2000" in capsys.readouterr().out


def test_sqlite_spend_many_proves_the_identity(tmp_path: Path) -> None:
    import sqlite3

    ledger = SQLiteLedger(tmp_path / "l.db")
    ledger.spend("before")
    with sqlite3.connect(tmp_path / "l.db") as conn:
        conn.execute("DELETE FROM decision_ledger WHERE request_id = x''")  # its genesis
    with pytest.raises(UnsafeStoreConfig, match="forgot"):
        ledger.spend_many(["x", "y"])
    with sqlite3.connect(tmp_path / "l.db") as conn:
        rows = conn.execute("SELECT count(*) FROM decision_ledger").fetchone()[0]
    assert rows == 1  # rolled back: nothing of the batch stayed
    with pytest.raises(UnsafeStoreConfig):
        ledger.is_spent_many(["before"])


def test_the_resume_command_works_when_pasted(tmp_path: Path) -> None:
    """Each password becomes ``${DECISION_LEDGER_..._PASSWORD}`` in the printed command,
    and the same line says to export it: the shell then gives back the URLs as typed."""
    import argparse
    import subprocess

    from ledger_core import cli

    source = 'postgresql://me:p%40ss$w`o"rd@db.example/x?sslpassword=two&table=t'
    args = argparse.Namespace(
        url=source,
        target=f"sqlite:///{tmp_path}/n s.db",
        namespace=None,
        target_namespace="n s",
        merge=False,
        all_namespaces=False,
    )
    command, note = cli._resume_lines(args, "ab12")
    assert "p%40ss" not in command + note
    assert "two" not in command + note
    assert "export DECISION_LEDGER_SOURCE_PASSWORD=" in note
    assert "DECISION_LEDGER_SOURCE_PASSWORD_2=" in note
    assert "hidden" not in command  # the note is a line of its own
    env = {
        "DECISION_LEDGER_SOURCE_PASSWORD": 'p%40ss$w`o"rd',
        "DECISION_LEDGER_SOURCE_PASSWORD_2": "two",
        "PATH": "/usr/bin:/bin",
    }
    shown = subprocess.run(
        ["bash", "-c", f"printf '%s\\n' {command}"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert shown == [
        "decision-ledger",
        "migrate",
        source,
        f"sqlite:///{tmp_path}/n s.db",
        "--target-namespace",
        "n s",
        "--resume",
        "ab12",
    ]


def test_progress_has_a_plain_line_every_2_s_even_within_a_batch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not a terminal: the ticker says where the copy is while a batch is slow."""
    import threading

    from ledger_core import cli

    old, new = f"sqlite:///{tmp_path}/old.db", f"sqlite:///{tmp_path}/new.db"
    SQLiteLedger(tmp_path / "old.db").spend_many(["a", "b"])
    monkeypatch.setattr(cli._Meter, "EVERY", 0.1)
    ticked = threading.Event()
    real = SQLiteLedger.spend_many

    def slow(self: SQLiteLedger, ids: list[str]) -> list[bool]:
        ticked.wait(10)  # released by the ticker's first line (10 s: a bound, not a wait)
        return real(self, ids)

    real_say = cli._Meter._say

    def say(self: cli._Meter) -> None:
        real_say(self)
        ticked.set()

    monkeypatch.setattr(SQLiteLedger, "spend_many", slow)
    monkeypatch.setattr(cli._Meter, "_say", say)
    assert main(["migrate", old, new]) == 0
    assert ticked.is_set()
    assert "starting" in capsys.readouterr().err


def test_all_namespaces_shows_the_overall_progress(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from ledger_core import cli

    SQLiteLedger(tmp_path / "old.db").close()  # the URL's own namespace: listing opens it
    for name in ("a", "b"):
        SQLiteLedger(tmp_path / "old.db", namespace=name).spend_many(
            [f"{name}{n}" for n in range(5)]
        )
    monkeypatch.setattr(cli._Meter, "EVERY", 0.0)
    old, new = f"sqlite:///{tmp_path}/old.db", f"sqlite:///{tmp_path}/new.db"
    assert main(["migrate", old, new, "--all-namespaces"]) == 0
    err = capsys.readouterr().err
    assert "overall: 0 of 3 namespaces done, 5 of 10 ids, ETA" in err
    assert "overall: 1 of 3 namespaces done, 10 of 10 ids, ETA 0 s" in err


def test_an_early_ctrl_c_names_no_last_id_and_the_command_pastes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: "interrupted after 0 ids (last: None)", and the command ran on into the
    password note on the same line (a bash syntax error when pasted to its end)."""
    SQLiteLedger(tmp_path / "old.db").spend_many(["a", "b"])
    old, new = f"sqlite:///{tmp_path}/old.db", f"sqlite:///{tmp_path}/new.db"

    def interrupted(self: SQLiteLedger, ids: list[str]) -> list[bool]:
        raise KeyboardInterrupt

    monkeypatch.setattr(SQLiteLedger, "spend_many", interrupted)
    assert main(["migrate", old, new]) == 130
    lines = capsys.readouterr().err.splitlines()
    assert "interrupted after 0 ids; " in lines[-2]
    assert "last" not in lines[-2]
    assert lines[-1] == f"decision-ledger migrate {old} {new}"


def test_a_sentinel_password_is_hidden_in_the_resume_command(tmp_path: Path) -> None:
    """The Sentinels' own password (``sentinel_password=``) is read from the
    environment like the master's: ``..._2``, exported first."""
    import argparse

    from ledger_core import cli

    source = "redis+sentinel://:m4ster-pw@h:26379/prod?sentinel_password=s3ntinel-pw"
    args = argparse.Namespace(
        url=source,
        target=f"sqlite:///{tmp_path}/n.db",
        namespace=None,
        target_namespace=None,
        merge=False,
        all_namespaces=False,
    )
    command, note = cli._resume_lines(args, None)
    assert "m4ster-pw" not in command + note
    assert "s3ntinel-pw" not in command + note
    assert "sentinel_password=${DECISION_LEDGER_SOURCE_PASSWORD_2}" in command
    assert "DECISION_LEDGER_SOURCE_PASSWORD_2=" in note
