"""The async PostgreSQL ledger: the same decisions as the sync one, on psycopg's
asyncio API (:func:`ledger_core.steps.run_steps_async` drives them)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import generators
from psycopg.pq import TransactionStatus
from psycopg.rows import tuple_row
from psycopg_pool import AsyncConnectionPool

from ledger_core.base import AsyncReentrantLedgerBase
from ledger_core.ids import validate_request_id
from ledger_core.steps import run_steps_async

from . import commands, decisions, errors
from .commands import BINARY, FIRST_SHARE, Op, Prepared, Row, Statements, prepared_answer
from .decisions import Steps
from .identity import in_hot_standby
from .options import PgConfig, PoolOptions, Target, forked_pool_kwargs
from .watchdog import LoopWatchdog

if TYPE_CHECKING:
    from typing_extensions import Unpack

AConn = psycopg.AsyncConnection[Any]
APoolFactory = Callable[[], "AsyncConnectionPool[Any]"]


async def run_op(conn: AConn, op: Op) -> Row:
    """Send one op's message and read the answer it names (see the sync ``run_op``)."""
    if type(op.query) is Prepared:
        pgconn, values = conn.pgconn, op.params or ()
        async with conn.lock:
            setup = commands.unprepared(conn, op.query)
            if setup is not None:  # this session's first use of it: its error is the call's
                pgconn.send_query(setup)
                commands.prepared_now(await conn.wait(generators.execute(pgconn)), op.query, conn)
            pgconn.send_query_prepared(op.query, values, BINARY[: len(values)], 1)
            results = await conn.wait(generators.execute(pgconn))
        return prepared_answer(results, op, conn)
    cur = psycopg.AsyncCursor(conn, row_factory=tuple_row)
    await cur.execute(op.query, op.params, prepare=False)  # see the sync run_op
    if op.counted or op.result is None:
        return () if op.counted and cur.rowcount > 0 else None
    for _ in range(op.result):
        cur.nextset()
    return await cur.fetchone()


async def _tidy(conn: AConn, autocommit: bool) -> None:
    """Leave a connection as found: no open transaction, the host's autocommit back."""
    if conn.closed:
        return
    try:
        if conn.info.transaction_status != TransactionStatus.IDLE:
            await conn.rollback()
        if conn.autocommit != autocommit:
            await conn.set_autocommit(autocommit)
    except psycopg.Error:
        await conn.close()  # the pool replaces a closed connection


class AsyncPostgresLedger(decisions.GuardedShell, AsyncReentrantLedgerBase):
    """The asyncio twin of :class:`~ledger_postgres.PostgresLedger` (C9).

    Build it with ``await open_async_ledger("postgresql://...")``, :meth:`from_target`
    or :meth:`from_pool` on an ``AsyncConnectionPool`` the host owns (never closed
    here). In a forked child (whose event loop is a new one), it rebuilds its pool there.
    """

    def __init__(
        self,
        pool: AsyncConnectionPool[Any],
        config: PgConfig,
        *,
        owns_pool: bool,
        conninfo: str | None = None,
        password: str | None = None,
        make_pool: APoolFactory | None = None,
    ) -> None:
        """Not connected yet: use :meth:`from_target` or :meth:`from_pool`."""
        self._pool, self._config, self._owns_pool = pool, config, owns_pool
        self._conninfo, self._password = conninfo, password
        self._st = Statements(config)
        self._framed, self._closed = not owns_pool, False
        self._first_share = config.timeout * FIRST_SHARE
        self._forks = decisions.forks
        self._pool_to_open = False
        host = pool
        self._make_pool = make_pool or (
            lambda: AsyncConnectionPool(**forked_pool_kwargs(host, config.timeout))
        )
        self._watchdog = LoopWatchdog(self._first_share)

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

    @classmethod
    async def from_target(cls, target: Target) -> AsyncPostgresLedger:
        opened: list[AsyncPostgresLedger] = []  # the pool opens (and connects) after open

        async def configure(conn: AConn) -> None:
            # One round trip: a new session is set up while a call may be waiting for it.
            await conn.execute(opened[0]._st.session_script())

        def make_pool() -> AsyncConnectionPool[Any]:
            return AsyncConnectionPool(**target.pool_kwargs(), configure=configure)

        pool = make_pool()
        kwargs = {"conninfo": target.conninfo, "password": target.password}
        ledger = cls(pool, target.config, owns_pool=True, make_pool=make_pool, **kwargs)
        await ledger._start(target.location)
        opened.append(ledger)
        await pool.open(wait=False)  # only once the server has been found fit
        return ledger

    @classmethod
    async def from_pool(
        cls,
        pool: AsyncConnectionPool[Any],
        **options: Unpack[PoolOptions],
    ) -> AsyncPostgresLedger:
        """A ledger on the host's pool, whatever its sessions' defaults (see the sync
        ``from_pool``): each spend runs in its own framed transaction."""
        config = PgConfig(**options)
        ledger = cls(pool, config, owns_pool=False)
        return await ledger._start(f"{pool.name or 'host pool'} table={config.qualified}")

    # -- I/O ---------------------------------------------------------------------

    async def _run(self, op: Op) -> Row:
        """Run one op before its call's deadline (see the sync ledger's ``_run``)."""
        if self._forks != decisions.forks:
            self._after_fork()
        if self._pool_to_open:
            await self._pool.open(wait=False)  # idempotent: concurrent callers are fine
            self._pool_to_open = False
        left = self._time_left(op.due)
        try:
            if op.fresh and self._conninfo is not None:
                async with self._fresh(op.due) as conn:
                    row = await self._on(conn, op, op.due)
            else:  # getconn/putconn, as in the sync ledger's _run
                pool = self._pool
                conn = await pool.getconn(left)
                try:
                    row = await self._on(conn, op, self._answer_due(op, time.monotonic()))
                finally:
                    await pool.putconn(conn)
        except Exception as exc:
            self._check_outcome(op, None, exc)
            raise
        self._check_outcome(op, row, None)
        return row

    def _answer_due(self, op: Op, now: float) -> float:
        return min(op.due, now + self._first_share) if op.first else op.due

    def _after_fork(self) -> None:
        """In a forked child: drop (never close) the parent's pool, connections and
        loop timer; build a pool of our own, opened on the child's loop on first use."""
        self._watchdog = LoopWatchdog(self._first_share)
        self._pool = self._make_pool()
        self._owns_pool = True
        self._pool_to_open = True
        self._forks = decisions.forks

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
        """Run ``op`` on ``conn`` under a deadline, and give ``conn`` back as it came,
        whatever ends the call: an error, or a cancellation (``wait_for``), which is
        not an ``Exception``. Disarmed first, so a deadline can never shut a socket that
        is no longer this op's (a descriptor is reused as soon as it is closed)."""
        if in_hot_standby(conn.pgconn.parameter_status(b"in_hot_standby")):
            raise errors.standby_error(f"ledger {self._config.qualified}")
        host_autocommit, ticket, expired = conn.autocommit, None, False
        try:
            if not host_autocommit:
                await conn.set_autocommit(True)  # a host's session: our script brings its own
            ticket = self._watchdog.arm(conn.fileno(), due)
            return await run_op(conn, op)
        except Exception as exc:
            expired, ticket = self._expired(ticket), None
            if expired:
                raise self._deadline_passed() from exc
            raise
        finally:
            expired = self._watchdog.disarm(ticket) if ticket is not None else expired
            if expired:
                await conn.close()  # its socket is shut: the pool must not hand it out
            elif not host_autocommit or conn.pgconn.transaction_status != TransactionStatus.IDLE:
                await _tidy(conn, host_autocommit)

    # -- the ledger: each call awaits its decision -------------------------------

    async def _drive(self, steps: Steps) -> Any:
        return await run_steps_async(steps, self._run)

    async def _spend(self, request_id: bytes) -> bool:
        return bool(await self._drive(self._spend_steps(request_id)))

    async def _spend_as(self, request_id: bytes, digest: bytes) -> bool:
        return bool(await self._drive(self._spend_as_steps(request_id, digest)))

    async def _is_spent(self, request_id: bytes) -> bool:
        return bool(await self._drive(self._is_spent_steps(request_id)))

    async def spent_ids(self) -> AsyncIterator[str]:
        """Every id spent in this namespace, in byte order, a page per round trip."""
        async for request_id in self._pages("ids"):
            yield request_id

    async def namespaces(self) -> AsyncIterator[str]:
        """Every namespace of this table, own included (``NamespaceListing``)."""
        async for namespace in self._pages("namespaces"):
            yield namespace

    async def _pages(self, what: str) -> AsyncIterator[str]:
        after: bytes | None = b""
        while after is not None:
            names, after = await self._drive(self._page_steps(what, after))
            for name in names:
                yield name

    async def spend_many(self, request_ids: Sequence[str]) -> list[bool]:
        """Spend a batch (see the sync ``spend_many``)."""
        steps = self._spend_many_steps([validate_request_id(r) for r in request_ids])
        return list(await self._drive(steps))

    async def is_spent_many(self, request_ids: Sequence[str]) -> list[bool]:
        """Read a batch: one guarded statement per 1000 ids."""
        steps = self._spent_among_steps([validate_request_id(r) for r in request_ids])
        return list(await self._drive(steps))

    async def lineage(self) -> list[str]:
        """The store_ids this store was migrated from (its lineage markers)."""
        return list(await self._drive(self._lineage_steps()))

    async def aclose(self) -> None:
        """Close what this ledger opened; in a forked child that has not rebuilt yet,
        nothing (everything it holds is the parent's)."""
        if self._closing() and self._owns_pool:
            await self._pool.close()
