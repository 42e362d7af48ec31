"""The async DynamoDB ledger: the same decisions, awaited on an aiobotocore client;
``asyncio.wait_for`` bounds the whole call (a trickled reply, a wait for a connection)."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator
from typing import Any, TypeVar

from ledger_core.base import AsyncReentrantLedgerBase
from ledger_core.errors import LedgerClosed
from ledger_core.forks import PerProcess
from ledger_core.steps import Steps, run_steps_async
from ledger_core.tokens import new_token

from . import decisions
from .clients import AsyncClientFactory, client_target, host_async_factory
from .commands import Call, Request
from .decisions import Handle, Session
from .options import Target

R = TypeVar("R")


class AsyncDynamoDBLedger(AsyncReentrantLedgerBase):
    """The asyncio face of :class:`~.ledger.DynamoDBLedger`, same semantics (C9)."""

    def __init__(self, session: Session, handle: Handle):
        self._session = session
        self._handle = handle
        # Only marks the client this process's: a child's is awaited in _current (a
        # make here would have to build it synchronously).
        self._process: PerProcess[None] = PerProcess(None, lambda: None)

    @classmethod
    async def open(
        cls, target: Target, make_client: AsyncClientFactory, *, owned: bool = True
    ) -> AsyncDynamoDBLedger:
        session = Session(target.table, target.settings, target.location, target.endpoint_url)
        client = await make_client()
        ledger = cls(session, Handle(make_client, client, owned))
        try:
            ledger._info = await ledger._run(decisions.open_steps(session))
        except BaseException:
            await ledger.aclose()
            raise
        return ledger

    @classmethod
    async def from_client(cls, client: Any, table: str, **options: Any) -> AsyncDynamoDBLedger:
        """A ledger on an aiobotocore DynamoDB client the host already has (already
        entered; never closed by us)."""
        target = client_target(client, table, options)
        return await cls.open(target, host_async_factory(client), owned=False)

    async def __aenter__(self) -> AsyncDynamoDBLedger:
        return self

    async def _current(self) -> Any:
        handle = self._handle
        if handle.closed:
            raise LedgerClosed("this DynamoDB ledger is closed")
        if self._process.inherited():  # a forked child: never share the parent's sockets
            handle.adopt(await handle.make_client())
            self._process.get()  # the client is this process's now
        return handle.client

    async def _perform(self, request: Request) -> Any:
        if isinstance(request, Call):
            client = await self._current()
            answer = getattr(client, request.op)(**request.params)
            if request.due == math.inf:
                return await answer
            return await asyncio.wait_for(answer, max(request.due - time.monotonic(), 0.0))
        await asyncio.sleep(request.seconds)
        return None

    async def _run(self, steps: Steps[Request, R]) -> R:
        await self._current()  # a forked child's client is built before the deadline starts
        return await run_steps_async(steps, self._perform)

    async def _spend_as(self, request_id: bytes, digest: bytes | None = None) -> bool:
        steps = decisions.spend_steps(self._session, request_id, new_token(), digest)
        return await self._run(steps)

    _spend = _spend_as  # no digest: a plain spend

    async def _is_spent(self, request_id: bytes) -> bool:
        return await self._run(decisions.is_spent_steps(self._session, request_id))

    def spent_ids(self) -> AsyncIterator[str]:
        return self._scan(decisions.ParallelScan.ids(self._session))

    def namespaces(self) -> AsyncIterator[str]:
        return self._scan(decisions.ParallelScan.namespaces(self._session))

    async def _scan(self, scan: decisions.ParallelScan) -> AsyncIterator[str]:
        while pages := scan.next_pages():
            for name in scan.listed(list(await asyncio.gather(*map(self._run, pages)))):
                yield name

    async def aclose(self) -> None:
        if self._handle.closes(self._process.inherited()):
            await self._handle.client.close()


__all__ = ["AsyncDynamoDBLedger"]
