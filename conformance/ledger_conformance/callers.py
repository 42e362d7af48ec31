"""Who calls: callers in other processes, forked per use or freshly spawned interpreters.

A forked child inherits everything its parent imported and computed (a per-process
secret, a cache, a connection); a spawned interpreter imports it all again. A store that
is right only for the first kind passes every forked test. Each caller serves jobs over
a pipe: it opens its own ledger through the factory, runs the job's steps (gated ones
wait for the parent's release, so processes and threads race released together), and
sends back every recorded op and answer. Spawned interpreters cost an import each, so a
run keeps a small pool of them (``Spawned``) and reuses it.
"""

from __future__ import annotations

import asyncio
import contextlib
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
    (a value, or ``Raised``)."""

    flavor: str
    ops: list[Op]
    answers: list[object]


@dataclass(frozen=True)
class Raised:
    """A step that raised (its text): never a bool, so never a right answer."""

    error: str


class CallerFailed(AssertionError):
    """A caller in another process failed outside its ledger calls (or died)."""


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
        except BaseException as exc:
            conn.send(("error", error_text(exc)))


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
    ledger, cleanup = await enter_factory(
        factory, LedgerContext(store=job.label, flavor=job.flavor)
    )
    flavor = "async" if is_async_ledger(ledger) else "sync"
    ops: list[Op] = []
    answers: list[object] = []
    try:
        for n, step in enumerate(job.steps):
            if step.gated:
                conn.send(("ready", n))
                if not conn.poll(CALL_BOUND) or conn.recv() != "go":
                    raise CallerFailed("the parent did not release the caller in time")
            answers.append(await _call(ledger, job, step, ops))
    finally:
        await cleanup()
    return Outcome(flavor, ops, answers)


async def _call(ledger: Any, job: Job, step: Step, ops: list[Op]) -> object:
    invoke = time.monotonic_ns()
    error: str | None = None
    try:
        value = getattr(ledger, step.method)(*step.args)
        if asyncio.iscoroutine(value):
            value = await value
    except Exception as exc:
        value, error = None, error_text(exc)
    record_ops(ops, job.process, job.label, step, invoke, time.monotonic_ns(), value, error)
    return Raised(error) if error is not None else jsonable_answer(value)


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

    def start(self, job: Job) -> None:
        self.conn.send(job)

    def ready(self, timeout: float = CALL_BOUND) -> None:
        status, data = self._next(timeout)
        if status != "ready":
            raise CallerFailed(f"{self.name}: {data if status == 'error' else status}")

    def go(self) -> None:
        self.conn.send("go")

    def outcome(self, timeout: float = CALL_BOUND) -> Outcome:
        status, data = self._next(timeout)
        if status != "done":
            raise CallerFailed(f"{self.name} failed: {data}")
        return data  # type: ignore[no-any-return]

    def _next(self, timeout: float) -> tuple[str, Any]:
        try:
            if not self.conn.poll(timeout):
                return "error", f"no word within {timeout:g} s"
            status, data = self.conn.recv()
            return str(status), data
        except (EOFError, OSError) as exc:
            return "error", f"the process is gone ({type(exc).__name__})"


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


def portable(factory: Factory) -> Any:
    """What a new interpreter can rebuild ``factory`` from: the ``module:callable`` path
    it was loaded from, else itself when it pickles, else ``module:name`` when its module
    holds it under a name; None when none of these (a closure)."""
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
        """``count`` (at most ``size``) spawned callers, idle: each serves one job at a time."""
        with self._lock:
            while len(self._callers) < min(count, self.size):
                self._callers.append(_spawn(len(self._callers)))
            return [caller for caller, _ in self._callers[:count]]

    def close(self) -> None:
        with self._lock:
            for caller, proc in self._callers:
                with contextlib.suppress(OSError):  # already gone
                    caller.conn.send(None)
                caller.conn.close()
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(10)
            self._callers.clear()


def _spawn(number: int) -> tuple[Caller, subprocess.Popen[bytes]]:
    ours, its = socket.socketpair()
    code = f"from ledger_conformance.callers import main; main({its.fileno()})"
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        pass_fds=(its.fileno(),),
        stdin=subprocess.DEVNULL,
    )
    its.close()
    return Caller(f"spawned{number}", Connection(ours.detach())), proc


__all__ = [
    "Caller",
    "CallerFailed",
    "Job",
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
