"""The async MongoDB ledger (``AsyncMongoClient``, or a host's Motor client): the same
decisions as the sync shell, awaited (C9)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

from ledger_core.base import AsyncReentrantLedgerBase
from ledger_core.errors import LedgerClosed
from ledger_core.listing import pages_async
from ledger_core.steps import run_steps_async
from ledger_core.tokens import new_token

from . import decisions
from .commands import Request
from .ledger import command, host_client, of_collection
from .options import Settings


class AsyncConnection:
    """An ``AsyncMongoClient`` (or a Motor client: the same ``command`` awaited)."""

    def __init__(self, client: Any, database: str, *, owned: bool) -> None:
        self.client = client
        self.owned = owned
        self.db = client.get_database(database)
        self.admin = client.get_database("admin")

    async def perform(self, request: Request) -> Any:
        return await command(self, request)

    async def close(self) -> None:
        if self.owned:
            closed = self.client.close()
            if closed is not None:  # AsyncMongoClient.close is a coroutine, Motor's is not
                await closed


class AsyncMongoLedger(AsyncReentrantLedgerBase):
    """The asyncio face of :class:`~ledger_mongodb.MongoLedger`, same semantics (C9)."""

    def __init__(self, conn: AsyncConnection, store: decisions.Store) -> None:
        self._conn, self._store = conn, store
        self._info = store.info

    @classmethod
    async def open_on(
        cls, conn: AsyncConnection, settings: Settings, location: str
    ) -> AsyncMongoLedger:
        try:
            steps = decisions.open_steps(settings, conn.db.name, location, time.monotonic())
            store = await run_steps_async(steps, conn.perform)
        except BaseException:
            await conn.close()
            raise
        return cls(conn, store)

    @classmethod
    async def from_client(
        cls, client: Any, *, database: str | None = None, **options: Any
    ) -> AsyncMongoLedger:
        """A ledger on a host's ``AsyncMongoClient`` or Motor ``AsyncIOMotorClient``
        (its default database unless named); never closed by the ledger."""
        name, settings, where = host_client(client, database, options)
        return await cls.open_on(AsyncConnection(client, name, owned=False), settings, where)

    @classmethod
    async def from_database(cls, database: Any, **options: Any) -> AsyncMongoLedger:
        return await cls.from_client(database.client, database=database.name, **options)

    @classmethod
    async def from_collection(cls, collection: Any, **options: Any) -> AsyncMongoLedger:
        return await cls.from_database(collection.database, **of_collection(collection, options))

    async def _steps(self, steps: decisions.Steps) -> Any:
        if self._store.closed:
            raise LedgerClosed("this MongoDB ledger was closed")
        return await run_steps_async(steps, self._conn.perform)

    async def _spend_as(self, request_id: bytes, digest: bytes | None = None) -> bool:
        now = time.monotonic()
        steps = decisions.spend_steps(self._store, request_id, new_token(), now, digest)
        return bool(await self._steps(steps))

    _spend = _spend_as  # no digest: a plain spend

    async def _is_spent(self, request_id: bytes) -> bool:
        steps = decisions.is_spent_steps(self._store, request_id, time.monotonic())
        return bool(await self._steps(steps))

    async def spend_many(self, request_ids: Sequence[str]) -> list[bool]:
        """Spend a batch (see :meth:`MongoLedger.spend_many`)."""
        batches = decisions.batches(self._store, request_ids, spend=True)
        return [won for steps in batches for won in await self._steps(steps)]

    async def is_spent_many(self, request_ids: Sequence[str]) -> list[bool]:
        batches = decisions.batches(self._store, request_ids, spend=False)
        return [spent for steps in batches for spent in await self._steps(steps)]

    def spent_ids(self) -> AsyncIterator[str]:
        return self._pages(decisions.list_steps)

    def namespaces(self) -> AsyncIterator[str]:
        """Every namespace of this collection, each once, streamed."""
        return self._pages(decisions.namespace_steps)

    def _pages(self, page: decisions.Page) -> AsyncIterator[str]:
        return pages_async(
            lambda after: self._steps(page(self._store, after, time.monotonic())), None
        )

    async def __aenter__(self) -> AsyncMongoLedger:
        return self

    async def aclose(self) -> None:
        if not self._store.closed:
            self._store.closed = True
            await self._conn.close()
