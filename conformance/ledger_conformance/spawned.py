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
import multiprocessing
import pickle
import threading
import time
from dataclasses import dataclass
from typing import Any

from .context import Factory, Flavor, LedgerContext, enter_factory
from .history import error_text, jsonable

SPAWN = multiprocessing.get_context("spawn")
START_BOUND = 60.0  # seconds a new interpreter may take to import and open its first ledger


@dataclass(frozen=True)
class Answer:
    """One call made in the spawned interpreter: when (CLOCK_MONOTONIC is system-wide),
    and its value or the error it raised (``opened=False``: the factory itself failed)."""

    invoke_ns: int
    complete_ns: int
    value: object
    error: str | None
    opened: bool = True


def portable(factory: Factory) -> str | None:
    """Why ``factory`` cannot be sent to a new interpreter, or None when it can."""
    try:
        pickle.loads(pickle.dumps(factory))
    except Exception as exc:
        return f"the factory cannot be sent to a new interpreter ({error_text(exc)})"
    return None


class SpawnedWorker:
    """One spawned interpreter serving calls one at a time."""

    def __init__(self, factory: Factory) -> None:
        self._conn, child = SPAWN.Pipe()
        self._proc = SPAWN.Process(
            target=_serve, args=(pickle.dumps(factory), child), name="ledger-suite-spawned"
        )
        self._proc.daemon = True
        self._proc.start()
        child.close()
        self._lock = threading.Lock()
        self._started = False

    def call(
        self, label: str, flavor: Flavor, method: str, args: tuple[object, ...], bound: float
    ) -> Answer:
        """``method(*args)`` on a new ledger of the store ``label``, in the worker."""
        with self._lock:
            wait = bound if self._started else bound + START_BOUND
            self._conn.send((label, flavor, method, args))
            if not self._conn.poll(wait):
                self.close()
                raise TimeoutError(f"the spawned interpreter gave no answer within {wait:g} s")
            answer: Answer = self._conn.recv()
            self._started = True
            return answer

    @property
    def alive(self) -> bool:
        return self._proc.is_alive()

    def close(self) -> None:
        if self._proc.is_alive():
            with contextlib.suppress(OSError):
                self._conn.send(None)
            self._proc.join(5)
        if self._proc.is_alive():
            self._proc.kill()
            self._proc.join(5)
        self._conn.close()


_workers: dict[int, SpawnedWorker] = {}
_workers_lock = threading.Lock()


def worker_for(factory: Factory) -> SpawnedWorker:
    """The session's worker for ``factory`` (started on first use, then reused)."""
    with _workers_lock:
        worker = _workers.get(id(factory))
        if worker is None or not worker.alive:
            worker = _workers[id(factory)] = SpawnedWorker(factory)
        return worker


@atexit.register
def _close_all() -> None:
    with _workers_lock:
        workers = list(_workers.values())
        _workers.clear()
    for worker in workers:
        worker.close()


def _serve(blob: bytes, conn: Any) -> None:
    """The worker's whole life: calls until the pipe closes or says stop."""
    factory = pickle.loads(blob)
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        label, flavor, method, args = message
        conn.send(
            asyncio.run(_one(factory, LedgerContext(store=label, flavor=flavor), method, args))
        )


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
            error = None
        except Exception as exc:
            value, error = None, error_text(exc)
        complete = time.monotonic_ns()
        shipped = [jsonable(v) for v in value] if isinstance(value, list) else jsonable(value)
        return Answer(invoke, complete, shipped, error)
    finally:
        await cleanup()


__all__ = ["Answer", "SpawnedWorker", "portable", "worker_for"]
