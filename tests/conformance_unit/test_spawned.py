"""The suite's spawned interpreters: fresh ``python`` processes, a pool of them reused
across jobs and factories, each job opening its own ledger; started from any
``__main__``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ledger_conformance import LedgerContext
from ledger_conformance.callers import CallerFailed, Job, NotOpened, Raised, Spawned, Step
from ledger_conformance.urlmode import URLFactory


def _job(factory: Any, method: str, *args: object, flavor: str = "sync") -> Job:
    steps = (Step(method, args),)
    return Job("store", flavor, steps, "spawned", factory, tuple(sys.path))  # type: ignore[arg-type]


def test_one_interpreter_serves_every_factory(tmp_path: Path) -> None:
    """Jobs of two factories through one interpreter (reused), each answered by the store
    its factory names, sync and async, and timed."""
    first = URLFactory(f"sqlite:///{tmp_path / 'a.db'}", "spawn")
    second = URLFactory(f"sqlite:///{tmp_path / 'b.db'}", "spawn")
    pool = Spawned(size=1)
    try:
        (caller,) = pool.take(1)
        spent = pool.call(_job(first, "spend", "x"))
        again = pool.call(_job(first, "spend", "x", flavor="async"))
        elsewhere = pool.call(_job(second, "spend", "x"))
        (same,) = pool.take(1)
    finally:
        pool.close()
    assert same is caller
    assert [o.answers for o in (spent, again, elsewhere)] == [[True], [False], [True]]
    assert (spent.flavor, again.flavor) == ("sync", "async")
    ((invoke, complete),) = spent.times
    assert invoke <= complete


def test_a_ledger_error_is_told_from_any_other(tmp_path: Path) -> None:
    """Only a LedgerError may come out of a call (C4): the interpreter says which it was,
    since a backend's own subclass is not known by name to the suite's process."""
    factory = URLFactory(f"sqlite:///{tmp_path / 'l.db'}", "spawn")
    pool = Spawned(size=1)
    try:
        (refused,) = pool.call(_job(factory, "spend", "")).answers
        (broken,) = pool.call(_job(factory, "no_such_method")).answers
    finally:
        pool.close()
    assert isinstance(refused, Raised)
    assert refused.ledger_error
    assert isinstance(broken, Raised)
    assert not broken.ledger_error


def unopenable(ctx: LedgerContext) -> Any:
    raise RuntimeError("no such store here")


def crashing(ctx: LedgerContext) -> Any:
    os._exit(3)  # a crash in the store, as a C extension's would end the interpreter


def test_a_factory_that_raises_is_not_opened() -> None:
    pool = Spawned(size=1)
    try:
        with pytest.raises(NotOpened, match="no such store here"):
            pool.call(_job(unopenable, "spend", "x"))
    finally:
        pool.close()


def test_an_interpreter_that_dies_is_said_to_and_replaced(tmp_path: Path) -> None:
    pool = Spawned(size=1)
    try:
        with pytest.raises(CallerFailed, match="the process is gone"):
            pool.call(_job(crashing, "spend", "x"))
        factory = URLFactory(f"sqlite:///{tmp_path / 'l.db'}", "spawn")
        assert pool.call(_job(factory, "spend", "x")).answers == [True]
    finally:
        pool.close()


def test_started_from_a_main_read_from_stdin(tmp_path: Path) -> None:
    """multiprocessing's spawn re-runs the caller's ``__main__``: a script read from stdin
    (or a program embedding the suite) does not survive that. The interpreter is a plain
    ``python -c`` and needs no such thing."""
    script = (
        "import sys\n"
        "from ledger_conformance.callers import Job, Spawned, Step\n"
        "from ledger_conformance.urlmode import URLFactory\n"
        f"factory = URLFactory('sqlite:///{tmp_path / 'l.db'}', 'spawn')\n"
        "pool = Spawned(size=1)\n"
        "job = Job('store', 'sync', (Step('spend', ('x',)),), 'spawned', factory, ())\n"
        "print(pool.call(job).answers[0])\n"
        "pool.close()\n"
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
