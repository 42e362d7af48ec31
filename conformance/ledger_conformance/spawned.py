"""Operations from a freshly spawned interpreter: no memory, class or module state
inherited from the suite's process (a forked child shares all of it until it writes).

A spawned interpreter pays its imports (about a second) once: one worker per factory is
kept for the session and reused, each call opening a new ledger through the factory,
making one call and closing it. The factory is sent by pickle, so it must be importable
by name (a module-level function or a ``URLFactory``); a closure cannot be sent, and the
clause that wanted a new interpreter says so.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import pickle
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection

from ledger_core.errors import LedgerError

from .context import Factory, Flavor, LedgerContext, enter_factory
from .history import error_text, jsonable

START_BOUND = 60.0  # seconds a new interpreter may take to import and open its first ledger
# The worker's own command: a new interpreter that imports nothing of the caller's
# ``__main__`` (multiprocessing's spawn re-runs it, which an embedding program or a
# script read from stdin does not survive).
COMMAND = ("-c", "from ledger_conformance.spawned import serve; serve()")
FD_ENV = "LEDGER_CONFORMANCE_WORKER_FD"


@dataclass(frozen=True)
class Answer:
    """One call made in the spawned interpreter: when (CLOCK_MONOTONIC is system-wide),
    and its value or the error it raised (``opened=False``: the factory itself failed)."""

    invoke_ns: int
    complete_ns: int
    value: object
    error: str | None
    opened: bool = True
    ledger_error: bool = False  # the error was a LedgerError (C4: the only kind allowed)


def portable(factory: Factory) -> str | None:
    """Why ``factory`` cannot be sent to a new interpreter, or None when it can."""
    try:
        pickle.loads(pickle.dumps(factory))
    except Exception as exc:
        return f"the factory cannot be sent to a new interpreter ({error_text(exc)})"
    return None


class SpawnedWorker:
    """One new interpreter serving calls one at a time, over a socket pair."""

    def __init__(self, factory: Factory) -> None:
        ours, theirs = socket.socketpair()
        env = {
            **os.environ,
            FD_ENV: str(theirs.fileno()),
            # the caller's import path (a factory module beside the project, tests.zoo)
            "PYTHONPATH": os.pathsep.join(p for p in sys.path if p and os.path.isdir(p)),
        }
        self._proc = subprocess.Popen(
            [sys.executable, *COMMAND],
            env=env,
            pass_fds=(theirs.fileno(),),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
        )
        theirs.close()
        self._conn = Connection(ours.detach())
        self._conn.send_bytes(pickle.dumps(factory))
        self.factory = factory  # held: the session's map is keyed by id(), never reused
        self._lock = threading.Lock()
        self._started = False

    def call(
        self, label: str, flavor: Flavor, method: str, args: tuple[object, ...], bound: float
    ) -> Answer:
        """``method(*args)`` on a new ledger of the store ``label``, in the worker."""
        with self._lock:
            wait = bound if self._started else bound + START_BOUND
            try:
                self._conn.send((label, flavor, method, args))
                if not self._conn.poll(wait):
                    raise TimeoutError(f"no answer within {wait:g} s")
                answer: Answer = self._conn.recv()
            except (OSError, EOFError, TimeoutError) as exc:
                self.close()
                raise WorkerDied(
                    f"the new interpreter ended or hung ({error_text(exc)}; exit status "
                    f"{self._proc.returncode})"
                ) from None
            self._started = True
            return answer

    @property
    def alive(self) -> bool:
        return self._proc.poll() is None

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._conn.send(None)
        try:
            self._proc.wait(5)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait(5)
        self._conn.close()


class WorkerDied(RuntimeError):
    """The new interpreter died (a crash in the store, a signal) or stopped answering."""


_workers: dict[int, SpawnedWorker] = {}
_workers_lock = threading.Lock()


def worker_for(factory: Factory) -> SpawnedWorker:
    """The session's worker for ``factory`` (started on first use, then reused)."""
    with _workers_lock:
        worker = _workers.get(id(factory))
        if worker is None or worker.factory is not factory or not worker.alive:
            worker = _workers[id(factory)] = SpawnedWorker(factory)
        return worker


@atexit.register
def _close_all() -> None:
    with _workers_lock:
        workers = list(_workers.values())
        _workers.clear()
    for worker in workers:
        worker.close()


def serve() -> None:
    """The worker's whole life: the factory, then calls until told to stop."""
    conn = Connection(int(os.environ[FD_ENV]))
    factory = pickle.loads(conn.recv_bytes())
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        label, flavor, method, args = message
        ctx = LedgerContext(store=label, flavor=flavor)
        conn.send(asyncio.run(_one(factory, ctx, method, args)))


async def _one(
    factory: Factory, ctx: LedgerContext, method: str, args: tuple[object, ...]
) -> Answer:
    try:
        ledger, cleanup = await enter_factory(factory, ctx)
    except Exception as exc:
        now = time.monotonic_ns()
        return Answer(now, now, None, error_text(exc), opened=False)
    try:
        invoke = time.monotonic_ns()
        try:
            value = getattr(ledger, method)(*args)
            if asyncio.iscoroutine(value):
                value = await value
            error, ledger_error = None, False
        except Exception as exc:
            value, error, ledger_error = None, error_text(exc), isinstance(exc, LedgerError)
        complete = time.monotonic_ns()
        shipped = [jsonable(v) for v in value] if isinstance(value, list) else jsonable(value)
        return Answer(invoke, complete, shipped, error, ledger_error=ledger_error)
    finally:
        await cleanup()


__all__ = ["Answer", "SpawnedWorker", "WorkerDied", "portable", "serve", "worker_for"]
