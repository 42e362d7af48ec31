"""Who calls: callers in other processes, forked per use or freshly spawned interpreters.

A forked child inherits everything its parent imported and computed (a per-process
secret, a cache, a connection); a spawned interpreter imports it all again. A store that
is right only for the first kind passes every forked test. Each caller serves jobs over
a pipe: it opens its own ledger through the factory, runs the job's steps (gated ones
wait for the parent's release, so processes and threads race released together), and
sends back every recorded op and answer. Spawned interpreters cost an import each, so a
run keeps a small pool of them (``Spawned``) and reuses it for every factory: the job
carries the factory (pickled, or the ``module:callable`` path it was loaded from), so a
closure cannot be sent, and the clause that wanted a new interpreter says so. The
interpreter is a plain ``python -c``: it imports nothing of the caller's ``__main__``
(multiprocessing's spawn re-runs it, which an embedding program or a script read from
stdin does not survive).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pickle
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

from ledger_core.errors import LedgerError
from ledger_core.protocol import is_async_ledger

from .context import Factory, Flavor, LedgerContext, enter_factory
from .harness import CALL_BOUND, KEY_SEPARATOR
from .history import Op, OpKind, error_text, jsonable

RECORDED: dict[str, OpKind] = {
    "spend": "spend",
    "is_spent": "is_spent",
    "spend_many": "spend",
    "is_spent_many": "is_spent",
}
SPAWNED_WORKERS = 2
START_BOUND = 60.0  # seconds a new interpreter may take to import, on top of its first call


@dataclass(frozen=True)
class Step:
    """One call: ``method(*args)``; a gated step first waits for the parent's release."""

    method: str
    args: tuple[Any, ...]
    gated: bool = False


@dataclass(frozen=True)
class Job:
    """What a caller does: open ``label`` as ``flavor`` through the factory, run ``steps``.
    ``factory`` is None for a forked caller (it inherited one)."""

    label: str
    flavor: Flavor
    steps: tuple[Step, ...]
    process: str
    factory: Any = None
    path: tuple[str, ...] = ()  # sys.path for a spawned interpreter


@dataclass
class Outcome:
    """A job done: the flavor the factory gave, the recorded ops, one answer per step
    (a value, or ``Raised``), and when each step ran (CLOCK_MONOTONIC is system-wide)."""

    flavor: str
    ops: list[Op]
    answers: list[object]
    times: list[tuple[int, int]] = field(default_factory=list)  # (invoke_ns, complete_ns)


@dataclass(frozen=True)
class Raised:
    """A step that raised (its text): never a bool, so never a right answer."""

    error: str
    ledger_error: bool = False  # a LedgerError (C4: the only kind a ledger may raise)


class CallerFailed(AssertionError):
    """A caller in another process failed outside its ledger calls (or died)."""


class NotOpened(CallerFailed):
    """The caller's factory raised: no ledger to call (the text is the error)."""


# -- the caller's side ---------------------------------------------------------------------


def serve(conn: Connection, inherited: Factory | None = None) -> None:
    """A caller's whole life: jobs until told to stop (``None``) or the pipe closes."""
    while True:
        try:
            job = conn.recv()
        except (EOFError, OSError):
            return
        if job is None:
            return
        try:
            conn.send(("done", asyncio.run(_perform(conn, job, inherited))))
        except _Unopened as exc:
            conn.send(("unopened", str(exc)))
        except BaseException as exc:
            conn.send(("error", error_text(exc)))


class _Unopened(Exception):
    """In the caller: the factory raised (its text)."""


def main(fd: int) -> None:
    """A spawned interpreter: ``python -c '...main(FD)'`` with one end of a socket pair."""
    serve(Connection(fd))


async def _perform(conn: Connection, job: Job, inherited: Factory | None) -> Outcome:
    for entry in job.path:
        if entry not in sys.path:
            sys.path.append(entry)
    factory = job.factory if job.factory is not None else inherited
    if isinstance(factory, str):
        from .loading import load_factory

        factory = load_factory(factory)
    if factory is None:
        raise CallerFailed("the caller was given no factory")
    try:
        ledger, cleanup = await enter_factory(
            factory, LedgerContext(store=job.label, flavor=job.flavor)
        )
    except Exception as exc:
        raise _Unopened(error_text(exc)) from None
    outcome = Outcome("async" if is_async_ledger(ledger) else "sync", [], [])
    try:
        for n, step in enumerate(job.steps):
            if step.gated:
                conn.send(("ready", n))
                if not conn.poll(CALL_BOUND) or conn.recv() != "go":
                    raise CallerFailed("the parent did not release the caller in time")
            outcome.answers.append(await _call(ledger, job, step, outcome))
    finally:
        await cleanup()
    return outcome


async def _call(ledger: Any, job: Job, step: Step, outcome: Outcome) -> object:
    invoke = time.monotonic_ns()
    error: str | None = None
    ledger_error = False
    try:
        value = getattr(ledger, step.method)(*step.args)
        if asyncio.iscoroutine(value):
            value = await value
    except Exception as exc:
        value, error, ledger_error = None, error_text(exc), isinstance(exc, LedgerError)
    complete = time.monotonic_ns()
    outcome.times.append((invoke, complete))
    record_ops(outcome.ops, job.process, job.label, step, invoke, complete, value, error)
    return Raised(error, ledger_error) if error is not None else jsonable_answer(value)


def jsonable_answer(value: object) -> object:
    """A list of answers stays a list; anything odd its repr (never a bool)."""
    if isinstance(value, list):
        return [jsonable(v) for v in value]
    return jsonable(value)


def record_ops(
    ops: list[Op],
    process: str,
    label: str,
    step: Step,
    invoke: int,
    complete: int,
    value: object,
    error: str | None,
) -> None:
    """The history's ops for one call: a batch is one op per id, each over the batch's
    whole interval with its own answer (or the batch's error: indeterminate)."""
    kind = RECORDED.get(step.method)
    if kind is None:
        return
    if step.method in ("spend", "is_spent"):
        key = f"{label}{KEY_SEPARATOR}{step.args[0]}"
        ops.append(Op(process, kind, key, invoke, complete, value, error))
        return
    ids = list(step.args[0])
    answers = value if isinstance(value, list) and len(value) == len(ids) else None
    for n, request_id in enumerate(ids):
        key = f"{label}{KEY_SEPARATOR}{request_id}"
        if error is not None:
            ops.append(Op(process, kind, key, invoke, complete, None, error))
        elif answers is None:
            ops.append(Op(process, kind, key, invoke, complete, repr(value), None))
        else:
            ops.append(Op(process, kind, key, invoke, complete, answers[n], None))


# -- the parent's side ---------------------------------------------------------------------


@dataclass
class Caller:
    """The parent's end of one caller's pipe."""

    name: str
    conn: Connection
    stop: Any = None  # ends a forked caller (spawned ones live for the run)
    started: bool = True  # False: a new interpreter still importing (START_BOUND more)
    busy: bool = False  # a job sent and not answered: not to be given another

    def start(self, job: Job) -> None:
        self.busy = True
        self.conn.send(job)

    def ready(self, timeout: float = CALL_BOUND) -> None:
        status, data = self._next(timeout)
        if status != "ready":
            raise CallerFailed(f"{self.name}: {data if status == 'error' else status}")

    def go(self) -> None:
        self.conn.send("go")

    def outcome(self, timeout: float = CALL_BOUND) -> Outcome:
        status, data = self._next(timeout)
        if status == "unopened":
            raise NotOpened(data)
        if status != "done":
            raise CallerFailed(f"{self.name} failed: {data}")
        return data  # type: ignore[no-any-return]

    def _next(self, timeout: float) -> tuple[str, Any]:
        wait = timeout if self.started else timeout + START_BOUND
        try:
            if not self.conn.poll(wait):
                return "hung", f"no word within {wait:g} s"
            status, data = self.conn.recv()
        except (EOFError, OSError) as exc:
            return "gone", f"the process is gone ({type(exc).__name__})"
        self.started = True
        self.busy = status == "ready"  # any other word ends the job
        return str(status), data


def release(callers: Sequence[Caller], local: threading.Barrier | None, timeout: float) -> None:
    """One round: every caller ready, then all released at once (the processes, then this
    process's threads waiting on ``local``). A caller that failed breaks the round."""
    try:
        for caller in callers:
            caller.ready(timeout)
    except BaseException:
        if local is not None:
            local.abort()
        raise
    for caller in callers:
        caller.go()
    if local is not None:
        local.wait(timeout)


def forked_caller(factory: Factory, name: str) -> Caller:
    """A caller forked now from this process (it inherits ``factory`` as it is)."""
    from .clauses.common import FORK

    ours, its = FORK.Pipe()
    child = FORK.Process(target=serve, args=(its, factory), name=name, daemon=True)
    child.start()
    its.close()

    def stop() -> None:
        with contextlib.suppress(OSError):  # already gone
            ours.send(None)
        child.join(CALL_BOUND)
        if child.is_alive():
            child.kill()
            child.join(CALL_BOUND)
        ours.close()

    return Caller(name, ours, stop)


UNPORTABLE = (
    "the factory cannot be rebuilt in a new interpreter (give a module-level callable, "
    "or one that pickles)"
)


def portable(factory: Factory) -> Any:
    """What a new interpreter can rebuild ``factory`` from: the ``module:callable`` path
    it was loaded from, else itself when it pickles, else ``module:name`` when its module
    holds it under a name; None when none of these (a closure: ``UNPORTABLE`` says why)."""
    from .loading import path_of

    path = path_of(factory)
    if path is not None:
        return path
    try:
        pickle.dumps(factory)
        return factory
    except Exception:  # not by value: by name, below
        pass
    module = sys.modules.get(getattr(factory, "__module__", "") or "")
    if module is None:
        return None
    for name, value in vars(module).items():
        if value is factory:
            return f"{module.__name__}:{name}"
    return None


@dataclass
class Spawned:
    """The run's pool of freshly spawned interpreters, started at first use."""

    size: int = SPAWNED_WORKERS
    _callers: list[tuple[Caller, subprocess.Popen[bytes]]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def take(self, count: int) -> list[Caller]:
        """``count`` (at most ``size``) spawned callers, idle: each serves one job at a time.
        One that died (a crash in the store) or never answered its last job is replaced."""
        with self._lock:
            for n, (caller, proc) in enumerate(self._callers[:count]):
                if caller.busy or proc.poll() is not None:
                    _end(caller, proc)
                    self._callers[n] = _spawn(n)
            while len(self._callers) < min(count, self.size):
                self._callers.append(_spawn(len(self._callers)))
            return [caller for caller, _ in self._callers[:count]]

    def call(self, job: Job, bound: float = CALL_BOUND) -> Outcome:
        """One job (no gated step) on the first caller, its outcome within ``bound``."""
        (caller,) = self.take(1)
        caller.start(job)
        return caller.outcome(bound)

    def close(self) -> None:
        with self._lock:
            for caller, proc in self._callers:
                _end(caller, proc)
            self._callers.clear()


def _end(caller: Caller, proc: subprocess.Popen[bytes]) -> None:
    """Tell the interpreter to stop (killed if it does not within 10 s)."""
    with contextlib.suppress(OSError):  # already gone
        caller.conn.send(None)
    caller.conn.close()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


def _spawn(number: int) -> tuple[Caller, subprocess.Popen[bytes]]:
    ours, its = socket.socketpair()
    code = f"from ledger_conformance.callers import main; main({its.fileno()})"
    # the caller's import path, before any job is unpickled (a factory's module: tests.zoo)
    path = os.pathsep.join(p for p in sys.path if p and os.path.isdir(p))
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": path},
        pass_fds=(its.fileno(),),
        stdin=subprocess.DEVNULL,
    )
    its.close()
    return Caller(f"spawned{number}", Connection(ours.detach()), started=False), proc


__all__ = [
    "START_BOUND",
    "UNPORTABLE",
    "Caller",
    "CallerFailed",
    "Job",
    "NotOpened",
    "Outcome",
    "Raised",
    "Spawned",
    "Step",
    "forked_caller",
    "main",
    "portable",
    "record_ops",
    "release",
    "serve",
]
