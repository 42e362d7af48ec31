"""The async Redis ledger: the same decisions and transport steps as the sync shell,
performed with ``redis.asyncio`` objects (:class:`~.transport.AsyncOps`), same
semantics (C9)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

from ledger_core.base import AsyncReentrantLedgerBase
from ledger_core.ids import DEFAULT_NAMESPACE, MarkerKind, validate_namespace
from ledger_core.steps import run_steps_async

from . import decisions
from .ledger import Shell, opening
from .options import RedisOptions
from .transport import AsyncOps, Transport, transport_for


class AsyncRedisLedger(Shell, AsyncReentrantLedgerBase):
    """The asyncio face of :class:`~ledger_redis.RedisLedger` (``redis.asyncio``)."""

    @classmethod
    async def from_client(
        cls, client: Any, *, namespace: str = DEFAULT_NAMESPACE, **options: Any
    ) -> AsyncRedisLedger:
        """A ledger on a ``redis.asyncio`` client, pool or Cluster client the host
        already has; the ledger never closes it."""
        opts = RedisOptions.for_client(options)
        transport = transport_for(client, asyncio_client=True)
        return await cls.open_on(transport, namespace=validate_namespace(namespace), options=opts)

    @classmethod
    async def open_on(
        cls,
        transport: Transport,
        *,
        namespace: str,
        options: RedisOptions,
        on_close: Callable[[], Awaitable[Any]] | None = None,
    ) -> AsyncRedisLedger:
        ops = AsyncOps(transport)
        try:
            opened = await run_steps_async(opening(transport, namespace, options), ops)
        except BaseException:
            if on_close is not None:
                await on_close()
            raise
        return cls(transport, opened, ops, on_close)

    async def _spend(self, request_id: bytes) -> bool:
        won: bool = await run_steps_async(self._spend_ops(request_id), self._perform)
        return won

    async def _spend_as(self, request_id: bytes, digest: bytes) -> bool:
        won: bool = await run_steps_async(self._spend_ops(request_id, digest), self._perform)
        return won

    async def _is_spent(self, request_id: bytes) -> bool:
        spent: bool = await run_steps_async(self._read_ops(request_id), self._perform)
        return spent

    async def spend_many(self, request_ids: Sequence[str]) -> list[bool]:
        """The asyncio face of :meth:`RedisLedger.spend_many`."""
        out: list[bool] = []
        for ops in self._batches(request_ids):
            answer = await run_steps_async(ops, self._perform)
            out += answer if isinstance(answer, list) else [answer]
        return out

    def spent_ids(self, count: int = 1000) -> AsyncIterator[str]:
        """The asyncio face of :meth:`RedisLedger.spent_ids`."""
        return self._scan(self._listing(count))

    async def lineage(self) -> list[str]:
        return sorted(
            [source async for source in self._scan(self._listing(1000, MarkerKind.LINEAGE))]
        )

    def namespaces(self, count: int = 1000) -> AsyncIterator[str]:
        """The asyncio face of :meth:`RedisLedger.namespaces`."""
        return self._scan(self._namespace_scan(count))

    async def _scan(self, scan: decisions.Scan) -> AsyncIterator[str]:
        while (items := await run_steps_async(self._page_ops(scan), self._perform)) is not None:
            for item in items:
                yield item

    async def aclose(self) -> None:
        if not self._io.closed:
            self._io.close()
            if self._on_close is not None:
                await self._on_close()
