"""The async SQLite ledger: the sync ledger's calls (the same code, so the same answers:
C9) on the ledger's own worker threads, so the event loop never waits on a disk sync or
a busy lock."""

from __future__ import annotations

import asyncio
import os
import queue
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, TypeVar

from ledger_core.base import AsyncReentrantLedgerBase
from ledger_core.errors import LedgerClosed
from ledger_core.forks import PerProcess
from ledger_core.listing import pages_async

from .ledger import SQLiteLedger

R = TypeVar("R")
_Call = tuple[asyncio.AbstractEventLoop, asyncio.Future[Any], Callable[..., Any], tuple[Any, ...]]
_Answer = tuple[asyncio.Future[Any], bool, Any]


class Workers:
    """Threads that run the ledger's blocking calls and hand the answers back to each
    event loop in batches: one wake-up of the loop for every answer that finished
    meanwhile. ``run_in_executor`` wakes the loop once per call, which under contention
    costs several times the call itself (about 250 against 45 µs a spend, 256 tasks)."""

    def __init__(self, size: int, closed: str) -> None:
        self._size = size
        self._closed = closed  # what a call after stop says (names the ledger, as sync does)
        self._calls: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._answers: dict[asyncio.AbstractEventLoop, list[_Answer]] = {}
        self._threads: list[threading.Thread] = []
        self._stopped = False

    def run(self, call: Callable[..., R], *args: Any) -> asyncio.Future[R]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[R] = loop.create_future()
        with self._lock:
            if self._stopped:  # no thread would ever take the call: the caller would hang
                raise LedgerClosed(self._closed)
            if not self._threads:  # started on first use: an unused ledger holds none
                for i in range(self._size):
                    thread = threading.Thread(
                        target=self._serve, name=f"ledger-sqlite-{i}", daemon=True
                    )
                    thread.start()
                    self._threads.append(thread)
            self._calls.put((loop, future, call, args))  # under the lock: before any stop
        return future

    def _serve(self) -> None:
        while (call := self._calls.get()) is not None:
            loop, future, function, args = call
            if future.cancelled():  # cancelled before it started: it never runs
                continue
            try:
                answer: _Answer = (future, True, function(*args))
            except BaseException as exc:  # delivered to the caller, whatever it is
                answer = (future, False, exc)
            with self._lock:
                waiting = self._answers.setdefault(loop, [])
                waiting.append(answer)
                wake = len(waiting) == 1  # else a wake-up is already on its way
            if wake:
                try:
                    loop.call_soon_threadsafe(self._deliver, loop)
                except RuntimeError:  # that loop is closed: nobody awaits its answers
                    with self._lock:
                        self._answers.pop(loop, None)

    def _deliver(self, loop: asyncio.AbstractEventLoop) -> None:
        with self._lock:
            answers = self._answers.pop(loop, [])
        for future, ok, value in answers:
            if future.cancelled():
                continue
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)

    def stop(self) -> None:
        """Let each thread finish the calls already queued, then end."""
        with self._lock:
            self._stopped = True
            for _ in self._threads:
                self._calls.put(None)


class AsyncSQLiteLedger(AsyncReentrantLedgerBase):
    """The asyncio face of :class:`SQLiteLedger` (its ``options``), same semantics (C9).
    Opening reads the file: prefer ``await AsyncSQLiteLedger.open(...)``."""

    def __init__(
        self, path: str | os.PathLike[str], *, max_workers: int = 4, **options: Any
    ) -> None:
        self._core = SQLiteLedger(path, **options)
        self._info = self._core.describe()

        def workers() -> Workers:
            return Workers(max_workers, f"{self!r} is closed")

        self._executor = PerProcess(workers(), workers)

    @classmethod
    async def open(cls, path: str | os.PathLike[str], **options: Any) -> AsyncSQLiteLedger:
        """Create the ledger without blocking the loop on the first open."""
        return await asyncio.to_thread(cls, path, **options)

    async def __aenter__(self) -> AsyncSQLiteLedger:
        return self

    def _workers(self) -> Workers:
        """The worker threads; a forked child gets its own (the parent's do not exist)."""
        return self._executor.get()

    async def _off(self, call: Callable[..., R], *args: Any) -> R:
        return await self._workers().run(call, *args)

    # The hot path goes straight to the workers (``_off`` would be one more frame).
    async def _spend(self, request_id: bytes) -> bool:
        return await self._executor.get().run(self._core._spend, request_id)

    async def _spend_as(self, request_id: bytes, digest: bytes) -> bool:
        return await self._executor.get().run(self._core._spend, request_id, digest)

    async def _is_spent(self, request_id: bytes) -> bool:
        return await self._executor.get().run(self._core._is_spent, request_id)

    async def spend_many(self, request_ids: Sequence[str]) -> list[bool]:
        return await self._off(self._core.spend_many, request_ids)

    async def is_spent_many(self, request_ids: Sequence[str]) -> list[bool]:
        return await self._off(self._core.is_spent_many, request_ids)

    def spent_ids(self, page: int = 1000) -> AsyncIterator[str]:
        return pages_async(lambda after: self._off(self._core._ids_page, after, page), b"")

    def namespaces(self, page: int = 100) -> AsyncIterator[str]:
        return pages_async(lambda after: self._off(self._core._namespaces_page, after, page), "")

    async def lineage(self) -> list[str]:
        return await self._off(self._core.lineage)

    async def aclose(self) -> None:
        self._workers().stop()
        await asyncio.to_thread(self._core.close)


__all__ = ["AsyncSQLiteLedger"]
