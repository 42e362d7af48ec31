"""The async PostgreSQL ledger: the same flows as the sync one, on psycopg's asyncio API."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from psycopg.pq import TransactionStatus
from psycopg.rows import tuple_row
from psycopg_pool import AsyncConnectionPool

from ledger_core.base import AsyncLedgerBase
from ledger_core.errors import LedgerClosed
from ledger_core.ids import DEFAULT_NAMESPACE, is_marker
from ledger_core.protocol import LedgerInfo
from ledger_core.tokens import new_token

from . import flows, rules
from .flows import Flow, Op, Row
from .options import Target
from .rules import PgConfig, Statements
from .watchdog import LoopWatchdog

AConn = psycopg.AsyncConnection[Any]


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


async def drive(flow: Flow, run: Any) -> Any:
    """Run a flow to its end: each op's row is sent in, each failure thrown in."""
    try:
        op = next(flow)
        while True:
            try:
                row = await run(op)
            except Exception as exc:
                op = flow.throw(exc)
            else:
                op = flow.send(row)
    except StopIteration as stop:
        return stop.value


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


class AsyncPostgresLedger(AsyncLedgerBase):
    """The asyncio twin of :class:`~ledger_postgres.PostgresLedger` (C9).

    Build it with ``await open_async_ledger("postgresql://...")``, :meth:`open` or
    :meth:`from_pool` on an ``AsyncConnectionPool`` the host owns (never closed here).
    """

    def __init__(
        self,
        pool: AsyncConnectionPool[Any],
        config: PgConfig,
        *,
        owns_pool: bool,
        conninfo: str | None = None,
        password: str | None = None,
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
        self._watchdog = LoopWatchdog(config.timeout)

    async def _start(self, location: str) -> AsyncPostgresLedger:
        flow = flows.open_flow(self._st, location, self._password)
        try:
            if self._conninfo is None:
                info = await drive(flow, self._run)
            else:  # one direct connection: a failure shows libpq's reason, not a pool timeout
                async with self._fresh() as conn:
                    info = await drive(flow, lambda op: self._on(conn, op))
        except BaseException:
            await self.aclose()
            raise
        self._info: LedgerInfo = info
        return self

    @classmethod
    async def from_target(cls, target: Target) -> AsyncPostgresLedger:
        st = Statements(target.config)

        async def configure(conn: AConn) -> None:
            await conn.execute(st.session_setup)

        pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            **target.pool_kwargs(), configure=configure
        )
        ledger = cls(
            pool,
            target.config,
            owns_pool=True,
            conninfo=target.conninfo,
            password=target.password,
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

    async def _run(self, op: Op) -> Row:
        if self._closed:
            raise LedgerClosed(f"ledger {self._config.qualified} is closed")
        if op.fresh and self._conninfo is not None:
            async with self._fresh() as conn:
                return await self._on(conn, op)
        async with self._pool.connection(timeout=self._config.timeout) as conn:
            return await self._on(conn, op)

    @asynccontextmanager
    async def _fresh(self) -> AsyncIterator[AConn]:
        assert self._conninfo is not None
        try:
            conn = await psycopg.AsyncConnection.connect(self._conninfo, autocommit=True)
        except psycopg.Error as exc:
            raise rules.unavailable("connecting", exc, self._password) from exc
        try:
            yield conn
        finally:
            await conn.close()

    async def _on(self, conn: AConn, op: Op) -> Row:
        if rules.in_hot_standby(conn.pgconn.parameter_status(b"in_hot_standby")):
            raise rules.standby_error(f"ledger {self._config.qualified}")
        host_autocommit = conn.autocommit
        if not host_autocommit:
            await conn.set_autocommit(True)  # a host's session: our script brings its own
        deadline = self._watchdog.arm(conn.fileno())
        try:
            row = await run_op(conn, op)
        except Exception as exc:
            await _tidy(conn, host_autocommit)
            if self._watchdog.disarm(deadline):
                await conn.close()  # its socket is shut: the pool must not hand it out
                raise rules.DeadlineExceeded(f"no answer within {self._config.timeout} s") from exc
            raise
        if not host_autocommit:
            await _tidy(conn, host_autocommit)
        if self._watchdog.disarm(deadline):
            await conn.close()
        return row

    # -- the ledger --------------------------------------------------------------

    async def _spend(self, request_id: bytes) -> bool:
        token = new_token()
        try:
            row = await self._run(flows.spend_op(self._st, self._framed, request_id, token))
        except Exception as exc:
            flow = flows.spend_failed(self._st, request_id, token, exc, self._password)
            return bool(await drive(flow, self._run))
        return row is not None

    async def _is_spent(self, request_id: bytes) -> bool:
        op = flows.is_spent_op(self._st, self._framed, request_id)
        try:
            row = await self._run(op)
        except Exception as exc:
            return bool(await drive(flows.is_spent_failed(op, exc, self._password), self._run))
        return row is not None

    async def spent_ids(self) -> AsyncIterator[str]:
        """Every id spent in this namespace, in byte order, a page per round trip."""
        after = b""
        while True:
            try:
                row = await self._run(flows.page_op(self._st, after))
            except Exception as exc:
                raise flows.listing_failed(exc, self._password) from exc
            ids = flows.page_ids(row)
            for request_id in ids:
                if not is_marker(request_id):
                    yield request_id.decode("utf-8")
            if len(ids) < rules.PAGE_SIZE:
                return
            after = ids[-1]

    async def aclose(self) -> None:
        self._closed = True
        self._watchdog.stop()
        if self._owns_pool:
            await self._pool.close()
