"""A SQLite file restored from a backup, and ``decision-ledger reidentify`` (C6)."""

from __future__ import annotations

import functools
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from ledger_conformance.runner import run_check
from ledger_core import open_ledger
from ledger_core.cli import main
from ledger_core.migrate import begin_run
from ledger_core.protocol import close_ledger, store_id_of
from ledger_core.reidentify import CannotReidentify, reidentify
from tests.restoring import restore_goes_unseen, restored_then_reidentified
from tests.sqlite.test_conformance_sqlite import FileRestore


def _url(tmp_path: Path, name: str = "ledger.db") -> str:
    return f"sqlite:///{tmp_path / name}"


def test_a_restored_file_keeps_its_store_id_until_reidentified(tmp_path: Path) -> None:
    """SQLite's own backup API restores the file in place (same inode) with the genesis
    of the backup: nothing can detect it."""
    restore_goes_unseen(_url(tmp_path), "default", FileRestore(tmp_path / "ledger.db"))


def test_a_restored_file_fails_closed_once_reidentified(tmp_path: Path) -> None:
    restored_then_reidentified(_url(tmp_path), "default", FileRestore(tmp_path / "ledger.db"))


def test_reidentify_alone_fails_every_open_instance(tmp_path: Path) -> None:
    restored_then_reidentified(_url(tmp_path), "ns", None)


def test_the_command_prints_both_identities(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = _url(tmp_path)
    ledgers: list[Any] = [open_ledger(url, namespace=name) for name in ("one", "two")]
    old = [str(store_id_of(ledger)) for ledger in ledgers]
    assert main(["reidentify", f"{url}?namespace=two"]) == 0
    out = capsys.readouterr().out
    assert f"namespace two: old store id {old[1]}, new store id sqlite:" in out
    assert old[0] not in out
    assert main(["reidentify", url, "--namespace", "one", "--all-namespaces"]) == 2
    assert main(["reidentify", f"{url}?namespace=one", "--all-namespaces"]) == 0
    out = capsys.readouterr().out
    assert "namespace one: old store id " + str(old[0]) in out
    assert "namespace two: " in out
    for ledger in ledgers:
        ledger.close()


def test_a_missing_namespace_or_file_is_refused_never_created(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = _url(tmp_path)
    close_ledger(open_ledger(url))
    assert main(["reidentify", url, "--namespace", "typo"]) == 3
    assert "setup" in capsys.readouterr().err
    assert main(["namespaces", url]) == 0
    assert "typo" not in capsys.readouterr().out
    assert main(["reidentify", _url(tmp_path, "missing.db")]) == 3
    assert not (tmp_path / "missing.db").exists()


def test_a_store_mid_migration_is_refused_with_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source: Any = open_ledger(_url(tmp_path, "old.db"))
    sibling: Any = open_ledger(_url(tmp_path), namespace="a-sibling")  # listed first
    target: Any = open_ledger(_url(tmp_path))
    begin_run(source, target)
    kept = store_id_of(target)
    with pytest.raises(CannotReidentify, match="nothing was changed"):
        reidentify(_url(tmp_path), all_namespaces=True)
    assert sibling.is_spent("x") is False  # not reidentified either: it still proves
    sibling.close()
    with pytest.raises(CannotReidentify, match="finish the migration first"):
        reidentify(_url(tmp_path))
    assert main(["reidentify", _url(tmp_path)]) == 3
    assert "incomplete migration" in capsys.readouterr().err
    assert target.is_spent("x") is False  # unchanged: the target still proves its identity
    assert store_id_of(target) == kept
    source.close()
    target.close()


def test_a_ledger_without_reidentify_gets_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["reidentify", "memory://restore-test"]) == 3
    assert "has no reidentify()" in capsys.readouterr().err


RESTORE_CMD = """{python} -c '
import os, sqlite3, sys
live, copy = sys.argv[1], sys.argv[1] + ".snapshot"
src, dst = (live, copy) if os.environ["LEDGER_RESTORE_PHASE"] == "snapshot" else (copy, live)
sqlite3.connect(src).backup(sqlite3.connect(dst))
' {path}"""


def test_check_runs_the_restore_procedure_as_shell_commands(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``decision-ledger check --restore CMD --after-restore CMD``: a restore with SQLite's
    backup API, then ``decision-ledger reidentify`` of the namespace it was told; with
    no after-restore step the same restore fails the clause, and a hook that restores
    nothing leaves it partly exercised."""
    path = tmp_path / "ledger.db"
    restore = RESTORE_CMD.format(python=shlex.quote(sys.executable), path=shlex.quote(str(path)))
    after = f'decision-ledger reidentify sqlite:///{path} --namespace "$LEDGER_RESTORE_NAMESPACE"'
    run = functools.partial(
        run_check, url=f"sqlite:///{path}", factory=None, profile="quick", select="C6_restore"
    )
    assert run(restore=restore, after_restore=after) == 0, capsys.readouterr().out
    assert "1 clause(s) passed, 0 failed" in capsys.readouterr().out
    assert run(restore=restore) == 1
    assert "0 clause(s) passed, 1 failed" in capsys.readouterr().out
    assert run(restore="true", after_restore=after) == 0  # a hook that restores nothing
    assert "the restore hook restored nothing" in capsys.readouterr().out


def test_the_doctor_names_the_procedure(capsys: pytest.CaptureFixture[str]) -> None:
    """For a ledger that cannot reidentify, the way it has instead."""
    assert main(["doctor", "memory://restore-doctor"]) == 1  # memory never proves
    out = capsys.readouterr().out
    assert "INFO  restore        MemoryLedger has no reidentify(): after restoring" in out
