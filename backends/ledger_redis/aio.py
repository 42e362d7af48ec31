"""The async Redis ledger: the same decisions as the sync shell, performed with
``redis.asyncio`` objects, same semantics (C9)."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, TypeVar

from ledger_core.base import AsyncReentrantLedgerBase
from ledger_core.ids import DEFAULT_NAMESPACE, validate_namespace
from ledger_core.listing import pages_async
from ledger_core.steps import run_steps_async

from .commands import Borrow, Exec, Op, Read, Release, Send
from .decisions import DEADLINE, Scan, Session, Transport, open_steps, transport_for
from .ledger import Shell, packed
from .options import RedisOptions

T = TypeVar("T")


async def within(awaitable: Awaitable[T]) -> T:
    deadline = DEADLINE.get()
    if deadline is None:
        return await awaitable
    left = deadline - time.monotonic()
    if sys.version_info >= (3, 11):
        async with asyncio.timeout(left):
            return await awaitable
    return await asyncio.wait_for(awaitable, left)


class AsyncDriver:
    """redis-py's async Cluster client fails at once when a node's connections are all
    in use; a semaphore as wide as that limit makes concurrent commands wait instead."""

    def __init__(self, io: Transport) -> None:
        self.client = io.client
        limit = self.client.get_connection_kwargs().get("max_connections") if io.cluster else 1
        self._slots = asyncio.Semaphore(int(limit or 100) or 1)  # only Cluster commands take it

    def __call__(self, op: Op) -> Awaitable[Any]:
        if isinstance(op, Release):  # never waits on the server
            return self._release(op)
        return self._timed(op)

    async def _release(self, op: Release) -> Any:
        if op.drop:
            await op.conn.disconnect(nowait=True)
        return await self.client.release(op.conn)

    async def _timed(self, op: Op) -> Any:
        """A ``TimeoutError`` goes to the steps, which drop the connection; a
        cancellation never does, so it is dropped here."""
        try:
            return await within(self._perform(op))
        except Exception:
            raise
        except BaseException:
            if isinstance(op, Read | Send):
                await op.conn.disconnect(nowait=True)
                await self.client.release(op.conn)
            raise

    async def _perform(self, op: Op) -> Any:
        if isinstance(op, Read):
            return await op.conn.read_response(disable_decoding=True)
        if isinstance(op, Send):
            return await op.conn.send_packed_command(packed(op.conn, op.commands))
        if isinstance(op, Exec):
            async with self._slots:  # a connection like any other command's
                return await self.client.execute_command(*op.command, **op.options)
        if isinstance(op, Borrow):
            return await self.client.get_connection()
        await self.client.initialize()
        return self.client.get_primaries()


class AsyncRedisLedger(Shell[AsyncIterator[str]], AsyncReentrantLedgerBase):
    """The asyncio face of :class:`~ledger_redis.RedisLedger` (``redis.asyncio``)."""

    @classmethod
    async def from_client(
        cls, client: Any, *, namespace: str = DEFAULT_NAMESPACE, **options: Any
    ) -> AsyncRedisLedger:
        opts = RedisOptions.for_client(options)
        io = transport_for(client, asyncio_client=True)
        return await cls.open_on(io, namespace=validate_namespace(namespace), options=opts)

    @classmethod
    async def open_on(
        cls,
        io: Transport,
        *,
        namespace: str,
        options: RedisOptions,
        on_close: Callable[[], Awaitable[Any]] | None = None,
    ) -> AsyncRedisLedger:
        driver = AsyncDriver(io)
        try:
            opened = await run_steps_async(open_steps(io, namespace, options), driver)
        except BaseException:
            if on_close is not None:
                await on_close()
            raise
        return cls(Session(io, opened), driver, on_close)

    async def _spend(self, request_id: bytes, digest: bytes | None = None) -> bool:
        return await run_steps_async(self._session.spend(request_id, digest), self._driver)

    _spend_as = _spend

    async def _is_spent(self, request_id: bytes) -> bool:
        return await run_steps_async(self._session.is_spent(request_id), self._driver)

    async def spend_many(self, request_ids: Sequence[str]) -> list[bool]:
        return await run_steps_async(self._spend_many(request_ids), self._driver)

    async def is_spent_many(self, request_ids: Sequence[str]) -> list[bool]:
        return await run_steps_async(self._is_spent_many(request_ids), self._driver)

    async def lineage(self) -> list[str]:
        return sorted([source async for source in self._lineage()])

    def _scan(self, scan: Scan) -> AsyncIterator[str]:
        return pages_async(lambda at: run_steps_async(self._session.page(at), self._driver), scan)

    async def aclose(self) -> None:
        if (close := self._close_transport()) is not None:
            await close()
