"""The async PostgreSQL ledger: the sync one's decisions on psycopg's asyncio API."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg.rows import tuple_row
from psycopg_pool import AsyncConnectionPool

from ledger_core.base import AsyncReentrantLedgerBase
from ledger_core.listing import pages_async
from ledger_core.steps import run_steps_async

from . import commands, decisions, errors
from .commands import Op, Prepared, Row, Statements
from .decisions import Steps
from .options import PgConfig, PoolOptions, Target
from .watchdog import LoopWatchdog

if TYPE_CHECKING:
    from typing_extensions import Unpack

AConn = psycopg.AsyncConnection[Any]


async def run_op(conn: AConn, op: Op) -> Row:
    """See the sync ``run_op``."""
    if type(op.query) is Prepared:
        async with conn.lock:
            return await conn.wait(commands.prepared_gen(conn, op))
    cur = psycopg.AsyncCursor(conn, row_factory=tuple_row)
    await cur.execute(op.query, op.params, prepare=False)  # see the sync run_op
    if op.counted or op.result is None:
        return commands.counted(cur, op)
    for _ in range(op.result):
        cur.nextset()
    return await cur.fetchone()


class AsyncPostgresLedger(decisions.GuardedShell, AsyncReentrantLedgerBase):
    """The asyncio twin of :class:`~ledger_postgres.PostgresLedger` (C9)."""

    _watchdog_class = LoopWatchdog
    _pool_class = AsyncConnectionPool
    _pages = staticmethod(pages_async)

    @classmethod
    async def from_target(cls, target: Target) -> AsyncPostgresLedger:
        script = Statements(target.config).session_script

        async def configure(conn: AConn) -> None:
            await conn.execute(script)  # see the sync from_target

        def make_pool() -> AsyncConnectionPool[Any]:
            return AsyncConnectionPool(**target.pool_kwargs(), configure=configure)

        kwargs = {"conninfo": target.conninfo, "password": target.password}
        ledger = cls(make_pool(), target.config, owns_pool=True, make_pool=make_pool, **kwargs)
        await ledger._start(target.location)
        await ledger._pool.open(wait=False)  # only once the server has been found fit
        return ledger

    @classmethod
    async def from_pool(
        cls,
        pool: AsyncConnectionPool[Any],
        **options: Unpack[PoolOptions],
    ) -> AsyncPostgresLedger:
        config = PgConfig(**options)
        ledger = cls(pool, config, owns_pool=False)
        return await ledger._start(f"{pool.name or 'host pool'} table={config.qualified}")

    async def _start(self, location: str) -> AsyncPostgresLedger:
        steps = decisions.open_ledger(self._st, location, self._password, self._due())
        try:
            if self._conninfo is None:
                opened = await run_steps_async(steps, self._run)
            else:  # one direct connection: a failure shows libpq's reason, not a pool timeout
                async with self._fresh(self._due()) as conn:
                    opened = await run_steps_async(steps, lambda op: self._on(conn, op, op.due))
        except BaseException:
            await self.aclose()
            raise
        self._opened(opened)
        return self

    async def _run(self, op: Op) -> Row:
        left = self._ready(op)
        if self._pool_to_open:
            await self._pool.open(wait=False)  # idempotent: concurrent callers are fine
            self._pool_to_open = False
        try:
            if op.fresh and self._conninfo is not None:
                async with self._fresh(op.due) as conn:
                    row = await self._on(conn, op, op.due)
            else:  # getconn/putconn, as in the sync ledger's _run
                pool = self._pool
                conn = await pool.getconn(left)
                try:
                    row = await self._on(conn, op, self._answer_due(op))
                finally:
                    await pool.putconn(conn)
        except Exception as exc:
            self._failed(op, exc)
            raise
        return self._answered(op, row)

    @asynccontextmanager
    async def _fresh(self, due: float) -> AsyncIterator[AConn]:
        assert self._conninfo is not None
        try:
            conn = await asyncio.wait_for(
                psycopg.AsyncConnection.connect(self._conninfo, autocommit=True),
                max(0.0, due - time.monotonic()),
            )
        except Exception as exc:  # libpq, psycopg's host resolution (idna), the OS, time
            raise errors.unavailable("connecting", exc, self._password) from exc
        try:
            yield conn
        finally:
            await conn.close()

    async def _on(self, conn: AConn, op: Op, due: float) -> Row:
        host_autocommit, deadline = conn.autocommit, self._taken(conn, due)
        try:
            with deadline:
                if not host_autocommit:
                    await conn.set_autocommit(True)  # a host's session: our script brings its own
                return await run_op(conn, op)
        finally:
            if deadline.expired:
                await conn.close()  # its socket is shut: the pool must not hand it out
            else:
                rollback, reset = self._as_found(conn, host_autocommit)
                try:
                    if rollback:
                        await conn.rollback()
                    if reset:
                        await conn.set_autocommit(host_autocommit)
                except psycopg.Error:
                    await conn.close()  # the pool replaces a closed connection

    async def _drive(self, steps: Steps) -> Any:
        return await run_steps_async(steps, self._run)

    async def spend_many(self, request_ids: Sequence[str]) -> list[bool]:
        return list(await self._drive(self._spend_many_steps(request_ids)))

    async def is_spent_many(self, request_ids: Sequence[str]) -> list[bool]:
        return list(await self._drive(self._spent_among_steps(request_ids)))

    async def lineage(self) -> list[str]:
        return list(await self._drive(self._lineage_steps()))

    async def aclose(self) -> None:
        if self._closing() and self._owns_pool:
            await self._pool.close()
