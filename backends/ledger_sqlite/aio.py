"""The async SQLite ledger: the sync ledger's calls (the same decisions) on the ledger's
own worker threads, so the event loop never waits on a disk sync or a busy lock."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from ledger_core.base import AsyncReentrantLedgerBase

from .ledger import SQLiteLedger

R = TypeVar("R")


class AsyncSQLiteLedger(AsyncReentrantLedgerBase):
    """The asyncio face of :class:`SQLiteLedger` (its ``options``), same semantics (C9).
    Opening reads the file: prefer ``await AsyncSQLiteLedger.open(...)``."""

    def __init__(
        self, path: str | os.PathLike[str], *, max_workers: int = 4, **options: Any
    ) -> None:
        self._core = SQLiteLedger(path, **options)
        self._info = self._core.describe()
        self._max_workers = max_workers
        self._pid = os.getpid()
        self._executor = ThreadPoolExecutor(max_workers, thread_name_prefix="ledger-sqlite")

    @classmethod
    async def open(cls, path: str | os.PathLike[str], **options: Any) -> AsyncSQLiteLedger:
        """Create the ledger without blocking the loop on the first open."""
        return await asyncio.to_thread(cls, path, **options)

    async def __aenter__(self) -> AsyncSQLiteLedger:
        return self

    def _workers(self) -> ThreadPoolExecutor:
        """The worker threads; a forked child gets its own (the parent's do not exist)."""
        if self._pid != os.getpid():
            self._executor = ThreadPoolExecutor(
                self._max_workers, thread_name_prefix="ledger-sqlite"
            )
            self._pid = os.getpid()
        return self._executor

    async def _off(self, call: Callable[..., R], *args: Any) -> R:
        return await asyncio.get_running_loop().run_in_executor(self._workers(), call, *args)

    async def _spend(self, request_id: bytes) -> bool:
        return await self._off(self._core._spend, request_id)

    async def _spend_as(self, request_id: bytes, digest: bytes) -> bool:
        return await self._off(self._core._spend_as, request_id, digest)

    async def _is_spent(self, request_id: bytes) -> bool:
        return await self._off(self._core._is_spent, request_id)

    async def spend_many(self, request_ids: Sequence[str]) -> list[bool]:
        return await self._off(self._core.spend_many, request_ids)

    async def is_spent_many(self, request_ids: Sequence[str]) -> list[bool]:
        return await self._off(self._core.is_spent_many, request_ids)

    async def spent_ids(self, page: int = 1000) -> AsyncIterator[str]:
        after: bytes | None = b""
        while after is not None:
            ids, after = await self._off(self._core._ids_page, after, page)
            for request_id in ids:
                yield request_id

    async def namespaces(self, page: int = 100) -> AsyncIterator[str]:
        after: str | None = ""
        while after is not None:
            names, after = await self._off(self._core._namespaces_page, after, page)
            for name in names:
                yield name

    async def lineage(self) -> list[str]:
        return await self._off(self._core.lineage)

    async def aclose(self) -> None:
        self._executor.shutdown(wait=False)
        await asyncio.to_thread(self._core.close)


__all__ = ["AsyncSQLiteLedger"]
