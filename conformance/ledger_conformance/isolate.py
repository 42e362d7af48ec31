"""Run every call into the store in forked children, so a store that crashes the
interpreter (a segfault in a C extension, an abort) fails the clause that crashed, or is
named with the step it crashed in, instead of taking ``decision-ledger check`` down.

The suite's pytest: each child writes every clause test's start and outcome as it happens;
after a crash a new child runs the tests not yet run. The check's own calls before and
after the run (opening each variant, ``describe()``, removing the scratch) go through
:func:`call_in_child`, which names the step a crash came in.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import pytest

from .collect import Collector
from .history import error_text
from .plugin import collector_of
from .report import CaseOutcome

CRASH_PREFIX = "the interpreter crashed in this test"
NOT_RUN = "not exercised: not run"
CRASH_CAUSES = (
    "Usual causes: a C extension (a driver, a binding) that dereferences a bad pointer or "
    "is used after fork or from another thread, or a store that aborts on a lock it cannot "
    "take"
)


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def killed_by(status: int) -> str | None:
    """``killed by signal N (NAME)`` for a wait status that ended by a signal, else None."""
    if not os.WIFSIGNALED(status):
        return None
    number = os.WTERMSIG(status)
    return f"killed by signal {number} ({signal_name(number)})"


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
        kept = [item.nodeid for item in session.items if item.nodeid in clauses]
        self._write(collected=kept, clauses={n: [clauses[n].id, clauses[n].title] for n in kept})

    @pytest.hookimpl(wrapper=True)
    def pytest_fixture_setup(self, fixturedef: Any) -> Any:
        """A shared (session, module, class) fixture's setup, bracketed: a crash inside it
        is that fixture's, not the clause test that happened to set it up first."""
        shared = fixturedef.scope != "function"
        if shared:
            self._write(fixture=fixturedef.argname, scope=fixturedef.scope)
        try:
            return (yield)
        finally:
            if shared:
                self._write(fixture_done=fixturedef.argname)

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


def _fork(run: Callable[[], int], timeout: float | None = None) -> int | None:
    """``run()`` in a forked child; its wait status, or None when it was still running
    after ``timeout`` seconds (then it is killed)."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: never returns into the caller's stack
        code = 1
        try:
            code = run()
        finally:
            os._exit(code)
    if timeout is None:
        return os.waitpid(pid, 0)[1]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        time.sleep(0.05)  # polls the child's exit: waitpid has no timeout of its own
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return None


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
    clauses: dict[str, list[str]] = {}
    for attempt in range(10_000):  # bounded: each round runs or crashes one test at least
        events = workdir / f"events-{attempt}.jsonl"
        child = functools.partial(_child, args, kept, events, done, log, after)
        status = _fork(functools.partial(inside, child))
        assert status is not None  # no timeout: the child's own calls are bounded
        started: dict[str, Any] | None = None
        finished = False
        fixtures: list[dict[str, Any]] = []  # shared fixtures being set up, innermost last
        for event in _read(events):
            if "collected" in event and collected is None:
                collected = list(event["collected"])
                clauses = dict(event.get("clauses", {}))
            elif "start" in event:
                started, finished = event, False
            elif "fixture" in event:
                fixtures.append(event)
            elif "fixture_done" in event and fixtures:
                fixtures.pop()
            elif "finish" in event:
                finished = True
                done.add(event["finish"])
                if event["outcome"] is not None:
                    result.outcomes[event["finish"]] = _outcome(event["outcome"])
            elif "exit" in event:
                result.code = int(event["exit"])
                result.tail = list(event["tail"])
        crash = killed_by(status)
        if crash is None:
            if not os.WIFEXITED(status) or os.WEXITSTATUS(status) != result.code:
                result.code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1
            return result
        result.code = 1
        if started is None or finished:
            result.crashes.append(f"the interpreter crashed outside any clause test: {crash}")
            return result
        if fixtures:  # every test left would set it up again, and crash again
            where = f"setting up the {fixtures[-1]['scope']} fixture {fixtures[-1]['fixture']}"
            result.crashes.append(
                f"the interpreter crashed {where} (for {_name(started['start'])}): {crash}; "
                f"the clause tests not yet run were not run. {CRASH_CAUSES}"
            )
            for nodeid in [n for n in collected or [] if n not in done and n in clauses]:
                clause, title = clauses[nodeid]
                result.outcomes[nodeid] = CaseOutcome(
                    clause, _name(nodeid), "skipped", f"{NOT_RUN}: {where} crashed", title=title
                )
            return result
        done.add(started["start"])
        result.outcomes[started["start"]] = _crashed(started, crash)
        if collected is not None and not [n for n in collected if n not in done]:
            return result
    return result


def _name(nodeid: str) -> str:
    return nodeid.rsplit("::", 1)[-1]


@dataclass
class ChildCall:
    """What a call in a forked child gave: its value, or how it crashed and in which step."""

    value: Any = None
    crash: str | None = None  # "killed by signal 6 (SIGABRT)"
    step: str = ""  # the last step the child started
    error: str | None = None  # an exception the call let out, or an exit without a value
    hung: str | None = None  # a child that did not answer in time: what it was doing

    def crash_line(self, what: str) -> str:
        """One line: the step that crashed and the signal, with the usual causes."""
        return (
            f"the interpreter crashed {self.step or what}: {self.crash}. {CRASH_CAUSES}; "
            "run that step alone (python -X faulthandler) to see where"
        )


def call_in_child(work: Callable[[Callable[[str], None]], Any], timeout: float) -> ChildCall:
    """``work(step)`` in a forked child, its JSON value sent back through a file; it calls
    ``step(text)`` before each call into the store, so a crash (or a hang: killed after
    ``timeout`` seconds) names the step."""
    with tempfile.TemporaryDirectory(prefix="decision-ledger-check-") as home:
        return _call_in_child(work, Path(home, "events.jsonl"), timeout)


def _call_in_child(
    work: Callable[[Callable[[str], None]], Any], events: Path, timeout: float
) -> ChildCall:

    def run() -> int:
        with open(events, "a", encoding="utf-8") as out:

            def write(**event: Any) -> None:
                out.write(json.dumps(event) + "\n")
                out.flush()

            try:
                write(value=work(lambda text: write(step=text)))
            except Exception as exc:
                write(error=error_text(exc))
        return 0

    found = ChildCall()
    status = _fork(run, timeout)
    crash = None if status is None else killed_by(status)
    got = False
    for event in _read(events):
        if "step" in event:
            found.step = str(event["step"])
        elif "value" in event:
            found.value, got = event["value"], True
        elif "error" in event:
            found.error = str(event["error"])
    if status is None:
        found.hung = f"no answer within {timeout:g} s (killed); the last step: {found.step}"
    elif crash is not None:
        found.crash = crash
    elif not got and found.error is None:
        found.error = "the child process exited without an answer"
    return found


def _crashed(started: dict[str, Any], crash: str) -> CaseOutcome:
    return CaseOutcome(
        str(started["clause"]),
        _name(str(started["start"])),
        "failed",
        f"{CRASH_PREFIX}: {crash}; the tests not yet run went on in a new process. "
        f"{CRASH_CAUSES}; run pytest on this test alone (-k and -p faulthandler) to see where",
        title=str(started["title"]),
    )
