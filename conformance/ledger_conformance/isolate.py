"""Run the suite's pytest in forked children, so a store that crashes the interpreter (a
segfault in a C extension) fails the clause that crashed instead of ``check`` itself.

Each child writes every clause test's start and outcome as it happens; after a crash a
new child runs the tests not yet run.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import signal
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import pytest

from .collect import Collector
from .plugin import collector_of
from .report import CaseOutcome

CRASH_PREFIX = "the interpreter crashed in this test"


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


class _Recorder:
    """A pytest plugin in the child: leaves out what an earlier child ran, and writes every
    clause test's start and outcome to ``out`` as it happens (flushed: a crash loses none)."""

    def __init__(self, out: IO[str], done: set[str]) -> None:
        self.out = out
        self.done = done
        self.collector: Collector | None = None

    def _write(self, **event: Any) -> None:
        self.out.write(json.dumps(event) + "\n")
        self.out.flush()

    @pytest.hookimpl(trylast=True)
    def pytest_configure(self, config: pytest.Config) -> None:
        self.collector = collector_of(config)

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[Any]) -> None:
        kept = [item for item in items if item.nodeid not in self.done]
        if len(kept) != len(items):
            config.hook.pytest_deselected(items=[i for i in items if i.nodeid in self.done])
            items[:] = kept

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        clauses = self.collector.clauses if self.collector is not None else {}
        self._write(collected=[item.nodeid for item in session.items if item.nodeid in clauses])

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        clause = self.collector.clauses.get(nodeid) if self.collector is not None else None
        if clause is not None:
            self._write(start=nodeid, clause=clause.id, title=clause.title)

    def pytest_runtest_logfinish(self, nodeid: str) -> None:
        found = self.collector.outcomes.get(nodeid) if self.collector is not None else None
        self._write(finish=nodeid, outcome=dataclasses.asdict(found) if found else None)


def _outcome(data: dict[str, Any]) -> CaseOutcome:
    data = dict(data)
    for name in ("notes", "partly"):
        data[name] = tuple(data[name])
    data["referred"] = tuple((str(c), str(t)) for c, t in data["referred"])
    return CaseOutcome(**data)


@dataclass
class IsolatedRun:
    """What the children ran: outcomes by test, pytest's exit code, crashes, extra lines."""

    outcomes: dict[str, CaseOutcome] = field(default_factory=dict)
    code: int = 0
    crashes: list[str] = field(default_factory=list)  # crashes outside any clause test
    tail: list[str] = field(default_factory=list)  # what the last child returned (scratch)


def _child(
    args: list[str],
    plugins: list[object],
    events: Path,
    done: set[str],
    log: Path | None,
    after: Callable[[], list[str]],
) -> int:
    if log is not None:  # quiet: every byte pytest (or a warning) writes goes to the log
        sys.stdout.flush()
        sys.stderr.flush()
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
    with open(events, "a", encoding="utf-8") as out:
        recorder = _Recorder(out, done)
        code = int(pytest.main(args, plugins=[*plugins, recorder]))
        recorder._write(exit=code, tail=after())
    return code


def _fork(run: Callable[[], int]) -> int:
    """``run()`` in a forked child; its wait status."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: never returns into the caller's stack
        code = 1
        try:
            code = run()
        finally:
            os._exit(code)
    return os.waitpid(pid, 0)[1]


def _read(events: Path) -> list[dict[str, Any]]:
    if not events.exists():
        return []
    lines = events.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def run_isolated(
    args: list[str],
    plugins: Iterable[object],
    workdir: Path,
    log: Path | None,
    after: Callable[[], list[str]] = list,
    inside: Callable[[Callable[[], int]], int] = lambda run: run(),
) -> IsolatedRun:
    """pytest ``args`` in forked children until every collected clause test ran once;
    ``after`` runs in the last child (the scratch removal), ``inside`` wraps each run."""
    result = IsolatedRun()
    kept = list(plugins)
    done: set[str] = set()
    collected: list[str] | None = None
    for attempt in range(10_000):  # bounded: each round runs or crashes one test at least
        events = workdir / f"events-{attempt}.jsonl"
        child = functools.partial(_child, args, kept, events, done, log, after)
        status = _fork(functools.partial(inside, child))
        started: dict[str, Any] | None = None
        finished = False
        for event in _read(events):
            if "collected" in event and collected is None:
                collected = list(event["collected"])
            elif "start" in event:
                started, finished = event, False
            elif "finish" in event:
                finished = True
                done.add(event["finish"])
                if event["outcome"] is not None:
                    result.outcomes[event["finish"]] = _outcome(event["outcome"])
            elif "exit" in event:
                result.code = int(event["exit"])
                result.tail = list(event["tail"])
        if not os.WIFSIGNALED(status):
            if not os.WIFEXITED(status) or os.WEXITSTATUS(status) != result.code:
                result.code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1
            return result
        number = os.WTERMSIG(status)
        crash = f"killed by signal {number} ({signal_name(number)})"
        if started is None or finished:
            result.crashes.append(f"the interpreter crashed outside any clause test: {crash}")
            result.code = 1
            return result
        done.add(started["start"])
        result.outcomes[started["start"]] = _crashed(started, crash)
        result.code = 1
        if collected is not None and not [n for n in collected if n not in done]:
            return result
    return result


def _crashed(started: dict[str, Any], crash: str) -> CaseOutcome:
    return CaseOutcome(
        str(started["clause"]),
        str(started["start"]).rsplit("::", 1)[-1],
        "failed",
        f"{CRASH_PREFIX}: {crash}; the tests not yet run went on in a new process. Usual "
        "causes: a C extension (a driver, a binding) that dereferences a bad pointer or "
        "is used after fork or from another thread; run pytest on this test alone "
        "(-k and -p faulthandler) to see where",
        title=str(started["title"]),
    )
