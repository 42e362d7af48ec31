"""The suite's spawned interpreter: a fresh ``python`` that opens ledgers through the
factory, reused across calls, started from any ``__main__``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ledger_conformance import LedgerContext
from ledger_conformance.spawned import SpawnedWorker, WorkerDied, portable
from ledger_conformance.urlmode import URLFactory


def test_a_spawned_interpreter_sees_the_parents_spends(tmp_path: Path) -> None:
    """Two calls through one worker (reused), both answered by the store the parent uses."""
    factory = URLFactory(f"sqlite:///{tmp_path / 'l.db'}", "spawn")
    worker = SpawnedWorker(factory)
    try:
        first = worker.call("store", "sync", "spend", ("x",), 60.0)
        again = worker.call("store", "async", "spend", ("x",), 60.0)
        read = worker.call("store", "sync", "is_spent", ("y",), 60.0)
    finally:
        worker.close()
    assert (first.value, again.value, read.value) == (True, False, False)
    assert first.error is None
    assert first.invoke_ns <= first.complete_ns


def test_a_ledger_error_is_told_from_any_other(tmp_path: Path) -> None:
    """Only a LedgerError may come out of a call (C4): the worker says which it was, since
    a backend's own subclass is not known by name to the suite's process."""
    worker = SpawnedWorker(URLFactory(f"sqlite:///{tmp_path / 'l.db'}", "spawn"))
    try:
        refused = worker.call("store", "sync", "spend", ("",), 60.0)
        broken = worker.call("store", "sync", "no_such_method", (), 60.0)
    finally:
        worker.close()
    assert refused.error is not None
    assert refused.ledger_error
    assert broken.error is not None
    assert not broken.ledger_error


def test_a_closure_cannot_be_sent() -> None:
    def factory(ctx: LedgerContext) -> Any:
        raise AssertionError("never called")

    reason = portable(factory)
    assert reason is not None
    assert "cannot be sent to a new interpreter" in reason


def test_a_worker_that_dies_is_said_to(tmp_path: Path) -> None:
    worker = SpawnedWorker(URLFactory(f"sqlite:///{tmp_path / 'l.db'}", "spawn"))
    worker.call("store", "sync", "spend", ("x",), 60.0)
    worker._proc.kill()  # a crash in the store, as a signal would end it
    with pytest.raises(WorkerDied, match="ended or hung"):
        worker.call("store", "sync", "spend", ("y",), 60.0)


def test_started_from_a_main_read_from_stdin(tmp_path: Path) -> None:
    """multiprocessing's spawn re-runs the caller's ``__main__``: a script read from stdin
    (or a program embedding the suite) does not survive that. The worker is a plain
    ``python -c`` and needs no such thing."""
    script = (
        "from ledger_conformance.spawned import SpawnedWorker\n"
        "from ledger_conformance.urlmode import URLFactory\n"
        f"w = SpawnedWorker(URLFactory('sqlite:///{tmp_path / 'l.db'}', 'spawn'))\n"
        "print(w.call('store', 'sync', 'spend', ('x',), 60.0).value)\n"
        "w.close()\n"
    )
    done = subprocess.run(
        [sys.executable, "-"],
        input=script,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"
