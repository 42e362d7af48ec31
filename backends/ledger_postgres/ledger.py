"""The sync PostgreSQL ledger: a thin shell that runs :mod:`.flows` on psycopg."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg.pq import TransactionStatus
from psycopg.rows import tuple_row
from psycopg_pool import ConnectionPool

from ledger_core.base import LedgerBase
from ledger_core.errors import LedgerClosed
from ledger_core.ids import DEFAULT_NAMESPACE, is_marker
from ledger_core.protocol import LedgerInfo
from ledger_core.tokens import new_token

from . import flows, rules
from .flows import Op, Row, drive
from .options import Target
from .rules import PgConfig, Statements
from .watchdog import Watchdog

Conn = psycopg.Connection[Any]


def run_op(conn: Conn, op: Op) -> Row:
    """Send one op's message and read the answer it names."""
    # Our own cursor class and row shape, whatever factories the host's pool configured.
    cur = psycopg.Cursor(conn, row_factory=tuple_row)
    # A script (no parameters) can never be a prepared statement, whatever the host's
    # prepare_threshold says.
    cur.execute(op.query, op.params, prepare=False if op.params is None else None)
    if op.counted:
        return () if cur.rowcount > 0 else None
    if op.result is None:
        return None
    for _ in range(op.result):
        cur.nextset()
    return cur.fetchone()


def _tidy(conn: Conn, autocommit: bool) -> None:
    """Leave a connection as found: no open transaction, the host's autocommit back."""
    if conn.closed:
        return
    try:
        if conn.info.transaction_status != TransactionStatus.IDLE:
            conn.rollback()
        if conn.autocommit != autocommit:
            conn.autocommit = autocommit
    except psycopg.Error:
        conn.close()  # the pool replaces a closed connection


class PostgresLedger(LedgerBase):
    """A ledger in a PostgreSQL table: one ``INSERT ... ON CONFLICT DO NOTHING`` per spend.

    Open it with ``open_ledger("postgresql://...")`` (the ledger then owns its pool) or
    :meth:`from_pool` on a pool the host already has (never closed by the ledger).
    """

    def __init__(
        self,
        pool: ConnectionPool[Any],
        config: PgConfig,
        *,
        owns_pool: bool,
        conninfo: str | None = None,
        location: str = "",
        password: str | None = None,
    ) -> None:
        self._pool = pool
        self._config = config
        self._owns_pool = owns_pool
        self._conninfo = conninfo
        self._password = password
        self._st = Statements(config)
        # A pool we configured runs bare statements; a host's pool gets framed ones.
        self._framed = not owns_pool
        self._closed = False
        self._watchdog = Watchdog(config.timeout, "ledger-postgres-deadlines")
        flow = flows.open_flow(self._st, location, password)
        try:
            if conninfo is None:
                info = drive(flow, self._run)
            else:  # one direct connection: a failure shows libpq's reason, not a pool timeout
                with self._fresh() as conn:
                    info = drive(flow, lambda op: self._on(conn, op))
        except BaseException:
            self.close()
            raise
        self._info: LedgerInfo = info

    @classmethod
    def from_target(cls, target: Target) -> PostgresLedger:
        st = Statements(target.config)

        def configure(conn: Conn) -> None:
            conn.execute(st.session_setup)

        pool: ConnectionPool[Any] = ConnectionPool(**target.pool_kwargs(), configure=configure)
        ledger = cls(
            pool,
            target.config,
            owns_pool=True,
            conninfo=target.conninfo,
            location=target.location,
            password=target.password,
        )
        pool.open(wait=False)  # only once the server has been found fit
        return ledger

    @classmethod
    def from_pool(
        cls,
        pool: ConnectionPool[Any],
        *,
        namespace: str = DEFAULT_NAMESPACE,
        schema: str = rules.DEFAULT_SCHEMA,
        table: str = rules.DEFAULT_TABLE,
        create: bool = True,
        timeout: float = rules.DEFAULT_TIMEOUT,
    ) -> PostgresLedger:
        """A ledger on the host's pool, whatever its sessions' defaults (isolation,
        autocommit, row factory): each spend runs in its own framed transaction."""
        config = PgConfig(namespace, schema, table, create, timeout)
        name = pool.name or "host pool"
        return cls(pool, config, owns_pool=False, location=f"{name} table={config.qualified}")

    # -- I/O ---------------------------------------------------------------------

    def _run(self, op: Op) -> Row:
        if self._closed:
            raise LedgerClosed(f"ledger {self._config.qualified} is closed")
        if op.fresh and self._conninfo is not None:
            with self._fresh() as conn:
                return self._on(conn, op)
        with self._pool.connection(timeout=self._config.timeout) as conn:
            return self._on(conn, op)

    @contextmanager
    def _fresh(self) -> Iterator[Conn]:
        assert self._conninfo is not None
        try:
            conn = psycopg.connect(self._conninfo, autocommit=True)
        except psycopg.Error as exc:
            raise rules.unavailable("connecting", exc, self._password) from exc
        try:
            yield conn
        finally:
            conn.close()

    def _on(self, conn: Conn, op: Op) -> Row:
        if rules.in_hot_standby(conn.pgconn.parameter_status(b"in_hot_standby")):
            raise rules.standby_error(f"ledger {self._config.qualified}")
        host_autocommit = conn.autocommit
        if not host_autocommit:
            conn.autocommit = True  # a host's session: our script brings its own transaction
        deadline = self._watchdog.arm(conn.fileno())
        try:
            row = run_op(conn, op)
        except Exception as exc:
            _tidy(conn, host_autocommit)
            if self._watchdog.disarm(deadline):
                conn.close()  # its socket is shut: the pool must not hand it out again
                raise rules.DeadlineExceeded(f"no answer within {self._config.timeout} s") from exc
            raise
        if not host_autocommit:
            _tidy(conn, host_autocommit)
        if self._watchdog.disarm(deadline):
            conn.close()
        return row

    # -- the ledger --------------------------------------------------------------

    def _spend(self, request_id: bytes) -> bool:
        token = new_token()
        try:
            row = self._run(flows.spend_op(self._st, self._framed, request_id, token))
        except Exception as exc:
            flow = flows.spend_failed(self._st, request_id, token, exc, self._password)
            return bool(drive(flow, self._run))
        return row is not None

    def _is_spent(self, request_id: bytes) -> bool:
        op = flows.is_spent_op(self._st, self._framed, request_id)
        try:
            row = self._run(op)
        except Exception as exc:
            return bool(drive(flows.is_spent_failed(op, exc, self._password), self._run))
        return row is not None

    def spent_ids(self) -> Iterator[str]:
        """Every id spent in this namespace, in byte order, a page per round trip
        (what ``ledger_core.migrate`` reads from a source)."""
        after = b""
        while True:
            try:
                row = self._run(flows.page_op(self._st, after))
            except Exception as exc:
                raise flows.listing_failed(exc, self._password) from exc
            ids = flows.page_ids(row)
            for request_id in ids:
                if not is_marker(request_id):
                    yield request_id.decode("utf-8")
            if len(ids) < rules.PAGE_SIZE:
                return
            after = ids[-1]

    def close(self) -> None:
        self._closed = True
        self._watchdog.stop()
        if self._owns_pool:
            self._pool.close()
