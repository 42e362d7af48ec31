"""The async PostgreSQL ledger: the same flows as the sync one, on psycopg's asyncio API."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from psycopg.pq import TransactionStatus
from psycopg.rows import tuple_row
from psycopg_pool import AsyncConnectionPool

from ledger_core.base import AsyncLedgerBase
from ledger_core.ids import DEFAULT_NAMESPACE, is_marker, validate_request_id
from ledger_core.protocol import LedgerInfo
from ledger_core.steps import run_steps_async
from ledger_core.tokens import new_token

from . import flows, rules
from .flows import Op, Row
from .options import Target, forked_pool_kwargs
from .rules import PgConfig, Statements
from .watchdog import LoopWatchdog

AConn = psycopg.AsyncConnection[Any]
APoolFactory = Callable[[], "AsyncConnectionPool[Any]"]


async def run_op(conn: AConn, op: Op) -> Row:
    """Send one op's message and read the answer it names."""
    # Our own cursor class and row shape, whatever factories the host's pool configured.
    cur = psycopg.AsyncCursor(conn, row_factory=tuple_row)
    # A script (no parameters) can never be a prepared statement, whatever the host's
    # prepare_threshold says.
    await cur.execute(op.query, op.params, prepare=False if op.params is None else None)
    if op.counted:
        return () if cur.rowcount > 0 else None
    if op.result is None:
        return None
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


def _child_pool(host: AsyncConnectionPool[Any], timeout: float) -> APoolFactory:
    """In a forked child, a pool like the host's (see ``options.forked_pool_kwargs``)."""
    return lambda: AsyncConnectionPool(**forked_pool_kwargs(host, timeout))


class AsyncPostgresLedger(flows.GuardedShell, AsyncLedgerBase):
    """The asyncio twin of :class:`~ledger_postgres.PostgresLedger` (C9).

    Build it with ``await open_async_ledger("postgresql://...")``, :meth:`open` or
    :meth:`from_pool` on an ``AsyncConnectionPool`` the host owns (never closed here).
    In a forked child (whose event loop is a new one), it rebuilds its pool there.
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
        """Not connected yet: use :meth:`open`, :meth:`from_target` or :meth:`from_pool`."""
        self._pool = pool
        self._config = config
        self._owns_pool = owns_pool
        self._conninfo = conninfo
        self._password = password
        self._st = Statements(config)
        self._framed = not owns_pool
        self._closed = False
        self._first_share = config.timeout * rules.FIRST_SHARE
        self._forks = flows.forks
        self._pool_to_open = False
        self._make_pool = make_pool or _child_pool(pool, config.timeout)
        self._watchdog = LoopWatchdog(self._first_share)

    async def _start(self, location: str) -> AsyncPostgresLedger:
        flow = flows.open_flow(self._st, location, self._password)
        due = time.monotonic() + self._config.timeout  # one deadline for the whole open
        try:
            if self._conninfo is None:
                opened = await run_steps_async(flow, lambda op: self._run(op, due))
            else:  # one direct connection: a failure shows libpq's reason, not a pool timeout
                async with self._fresh(due) as conn:
                    opened = await run_steps_async(flow, lambda op: self._on(conn, op, due))
        except BaseException:
            await self.aclose()
            raise
        self._info: LedgerInfo = opened.info
        self._st = self._st.guarded(opened.guard)
        return self

    @classmethod
    async def from_target(cls, target: Target) -> AsyncPostgresLedger:
        st = Statements(target.config)

        async def configure(conn: AConn) -> None:
            await conn.execute(st.session_setup)

        def make_pool() -> AsyncConnectionPool[Any]:
            return AsyncConnectionPool(**target.pool_kwargs(), configure=configure)

        pool = make_pool()
        ledger = cls(
            pool,
            target.config,
            owns_pool=True,
            conninfo=target.conninfo,
            password=target.password,
            make_pool=make_pool,
        )
        await ledger._start(target.location)
        await pool.open(wait=False)  # only once the server has been found fit
        return ledger

    @classmethod
    async def from_pool(
        cls,
        pool: AsyncConnectionPool[Any],
        *,
        namespace: str = DEFAULT_NAMESPACE,
        schema: str = rules.DEFAULT_SCHEMA,
        table: str = rules.DEFAULT_TABLE,
        create: bool = True,
        timeout: float = rules.DEFAULT_TIMEOUT,
    ) -> AsyncPostgresLedger:
        """A ledger on the host's pool, whatever its sessions' defaults (isolation,
        autocommit, row factory): each spend runs in its own framed transaction."""
        config = PgConfig(namespace, schema, table, create, timeout)
        ledger = cls(pool, config, owns_pool=False)
        return await ledger._start(f"{pool.name or 'host pool'} table={config.qualified}")

    # -- I/O ---------------------------------------------------------------------

    async def _run(self, op: Op, due: float, first: bool = False) -> Row:
        """Run one op before ``due`` (see the sync ledger's ``_run``); a store that
        forgot fails this ledger for good."""
        if self._forks != flows.forks:
            self._after_fork()
        if self._pool_to_open:
            await self._pool.open(wait=False)  # idempotent: concurrent callers are fine
            self._pool_to_open = False
        left = self._time_left(due)
        try:
            if op.fresh and self._conninfo is not None:
                async with self._fresh(due) as conn:
                    row = await self._on(conn, op, due)
            else:
                async with self._pool.connection(timeout=left) as conn:
                    if first:
                        due = min(due, time.monotonic() + self._first_share)
                    row = await self._on(conn, op, due)
        except Exception as exc:
            self._check_outcome(op, None, exc)
            raise
        self._check_outcome(op, row, None)
        return row

    def _after_fork(self) -> None:
        """In a forked child: drop (never close) the parent's pool, connections and
        loop timer; build a pool of our own, opened on the child's loop on first use."""
        self._watchdog = LoopWatchdog(self._first_share)
        self._pool = self._make_pool()
        self._owns_pool = True
        self._pool_to_open = True
        self._forks = flows.forks

    @asynccontextmanager
    async def _fresh(self, due: float) -> AsyncIterator[AConn]:
        assert self._conninfo is not None
        try:
            conn = await asyncio.wait_for(
                psycopg.AsyncConnection.connect(self._conninfo, autocommit=True),
                max(0.0, due - time.monotonic()),
            )
        except Exception as exc:  # libpq, psycopg's host resolution (idna), the OS, time
            raise rules.unavailable("connecting", exc, self._password) from exc
        try:
            yield conn
        finally:
            await conn.close()

    async def _on(self, conn: AConn, op: Op, due: float) -> Row:
        """Run ``op`` on ``conn`` under a deadline, and give ``conn`` back as it came,
        whatever ends the call: an error, or a cancellation (``wait_for``), which is
        not an ``Exception``. Disarmed first, so a deadline can never shut a socket that
        is no longer this op's (a descriptor is reused as soon as it is closed)."""
        if rules.in_hot_standby(conn.pgconn.parameter_status(b"in_hot_standby")):
            raise rules.standby_error(f"ledger {self._config.qualified}")
        host_autocommit = conn.autocommit
        ticket: int | None = None
        expired = False
        try:
            if not host_autocommit:
                await conn.set_autocommit(True)  # a host's session: our script brings its own
            ticket = self._watchdog.arm(conn.fileno(), due)
            return await run_op(conn, op)
        except Exception as exc:
            expired, ticket = ticket is not None and self._watchdog.disarm(ticket), None
            if expired:
                raise rules.DeadlineExceeded(f"no answer within {self._config.timeout} s") from exc
            raise
        finally:
            if ticket is not None:
                expired = self._watchdog.disarm(ticket)
            if expired:
                await conn.close()  # its socket is shut: the pool must not hand it out
            elif not host_autocommit or conn.pgconn.transaction_status != TransactionStatus.IDLE:
                await _tidy(conn, host_autocommit)

    # -- the ledger --------------------------------------------------------------

    async def _spend(self, request_id: bytes) -> bool:
        start = time.monotonic()
        token = new_token()
        op = flows.spend_op(self._st, self._framed, request_id, token)
        try:
            row = await self._run(op, start + self._config.timeout, first=True)
        except Exception as exc:
            due = start + self._config.timeout
            flow = flows.spend_failed(self._st, request_id, token, exc, self._password)
            return bool(await run_steps_async(flow, lambda next_op: self._run(next_op, due)))
        return row is not None

    async def _is_spent(self, request_id: bytes) -> bool:
        start = time.monotonic()
        op = flows.is_spent_op(self._st, self._framed, request_id)
        try:
            row = await self._run(op, start + self._config.timeout, first=True)
        except Exception as exc:
            due = start + self._config.timeout
            flow = flows.is_spent_failed(op, exc, self._password)
            return bool(await run_steps_async(flow, lambda next_op: self._run(next_op, due)))
        return flows.is_spent_answer(row)

    async def spent_ids(self) -> AsyncIterator[str]:
        """Every id spent in this namespace, in byte order, a page per round trip."""
        after = b""
        while True:
            try:
                row = await self._run(flows.page_op(self._st, after), self._due())
            except Exception as exc:
                raise flows.listing_failed(exc, self._password) from exc
            ids = flows.page_ids(row)
            for request_id in ids:
                if not is_marker(request_id):
                    yield request_id.decode("utf-8")
            if len(ids) < rules.PAGE_SIZE:
                return
            after = ids[-1]

    async def spend_many(self, request_ids: Sequence[str]) -> list[bool]:
        """Spend a batch: one multi-row INSERT per 1000 ids, each id's answer
        as :meth:`spend` would give it (``True`` only if this call recorded it)."""
        raws = [validate_request_id(r) for r in request_ids]
        out: list[bool] = []
        for i in range(0, len(raws), rules.BATCH_SIZE):
            chunk = raws[i : i + rules.BATCH_SIZE]
            if self._framed:  # a host's sessions: each spend in its own framed script
                out += [await self._spend(rid) for rid in chunk]
                continue
            op = flows.spend_many_op(self._st, chunk, new_token())
            try:
                row = await self._run(op, self._due(), first=True)
            except Exception as exc:
                raise flows.spend_many_failed(exc, self._password) from exc
            out += flows.spend_many_answer(chunk, row)
        return out

    async def is_spent_many(self, request_ids: Sequence[str]) -> list[bool]:
        """Read a batch: one guarded statement per 1000 ids."""
        raws = [validate_request_id(r) for r in request_ids]
        out: list[bool] = []
        for i in range(0, len(raws), rules.BATCH_SIZE):
            chunk = raws[i : i + rules.BATCH_SIZE]
            try:
                row = await self._run(flows.spent_among_op(self._st, chunk), self._due())
            except Exception as exc:
                raise flows.listing_failed(exc, self._password) from exc
            out += flows.spent_among_answer(chunk, row)
        return out

    async def lineage(self) -> list[str]:
        """The store_ids this store was migrated from (its lineage markers)."""
        try:
            row = await self._run(flows.lineage_op(self._st), self._due())
        except Exception as exc:
            raise flows.listing_failed(exc, self._password) from exc
        return flows.lineage_answer(row)

    def _due(self) -> float:
        return time.monotonic() + self._config.timeout

    async def aclose(self) -> None:
        """Close what this ledger opened; in a forked child that has not rebuilt yet,
        nothing (everything it holds is the parent's)."""
        self._closed = True
        if self._forks != flows.forks:
            return
        self._watchdog.stop()
        if self._owns_pool:
            await self._pool.close()
