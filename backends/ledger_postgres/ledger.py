"""The sync PostgreSQL ledger: a shell that performs :mod:`.decisions`' ops on psycopg."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from concurrent import futures
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg.rows import tuple_row
from psycopg_pool import ConnectionPool

from ledger_core.base import ReentrantLedgerBase
from ledger_core.doctor import Check
from ledger_core.listing import pages
from ledger_core.steps import run_steps

from . import commands, decisions, errors, identity, options
from .commands import Op, Prepared, Row, Statements
from .watchdog import Watchdog

if TYPE_CHECKING:
    from typing_extensions import Unpack

Conn = psycopg.Connection[Any]


def run_op(conn: Conn, op: Op) -> Row:
    # The hot path, straight through libpq (driver internals: conn.lock, conn.wait,
    # psycopg.generators), because the same statements through psycopg's public cursor
    # (an EXECUTE, or psycopg's own prepare) cut the bench's ledger/raw medians from
    # 0.90-1.77 to 0.58-1.05, and psycopg's prepare loses the session's settings after a
    # reset (docs/notes/driver-internals.md; test_the_hot_calls_open_no_psycopg_cursor,
    # test_statements_gone_from_a_live_session_are_prepared_again_and_sent_once).
    if type(op.query) is Prepared:
        with conn.lock:
            return conn.wait(commands.prepared_gen(conn, op))
    cur = psycopg.Cursor(conn, row_factory=tuple_row)  # whatever the host's factories
    # Never prepared: a batch statement's generic plan, made while the table was young,
    # stayed as it grew and a first migration went quadratic (2,000 ids/s).
    cur.execute(op.query, op.params, prepare=False)
    if op.counted or op.result is None:
        return commands.counted(cur, op)
    for _ in range(op.result):
        cur.nextset()
    return cur.fetchone()


def connect_within(conninfo: str, seconds: float) -> Conn:
    """A new autocommit connection, or :class:`errors.OutOfTime` after ``seconds``
    (libpq's ``connect_timeout`` has a 2 s floor and counts per host); a helper thread
    connects, and closes a connection that arrives too late."""
    arrived: futures.Future[Conn] = futures.Future()

    def attempt() -> None:
        try:
            arrived.set_result(psycopg.connect(conninfo, autocommit=True))
        except BaseException as exc:  # handed to the caller, which maps it
            arrived.set_exception(exc)

    threading.Thread(target=attempt, name="ledger-postgres-connect", daemon=True).start()
    try:
        return arrived.result(max(0.0, seconds))
    except futures.TimeoutError:
        arrived.add_done_callback(_close_late)  # at once if it has just arrived
    raise errors.OutOfTime(f"no connection within the call's timeout ({seconds:.2f} s left)")


def _close_late(arrived: futures.Future[Conn]) -> None:
    if arrived.exception() is None:
        arrived.result().close()


class PostgresLedger(decisions.GuardedShell, ReentrantLedgerBase):
    """A ledger in a PostgreSQL table: one ``INSERT ... ON CONFLICT`` per spend; on its
    own pool (``open_ledger``) or a host's (:meth:`from_pool`, never closed)."""

    _watchdog_class = Watchdog
    _pool_class = ConnectionPool
    _pages = staticmethod(pages)

    @classmethod
    def from_target(cls, target: options.Target) -> PostgresLedger:
        script = Statements(target.config).session_script

        def configure(conn: Conn) -> None:
            conn.execute(script)  # one round trip: a call may be waiting for the session

        def make_pool() -> ConnectionPool[Any]:
            return ConnectionPool(**target.pool_kwargs(), configure=configure)

        kwargs = {"conninfo": target.conninfo, "password": target.password}
        ledger = cls(make_pool(), target.config, owns_pool=True, make_pool=make_pool, **kwargs)
        ledger._start(target.location)
        ledger._pool.open(wait=False)  # only once the server has been found fit
        return ledger

    @classmethod
    def from_pool(
        cls,
        pool: ConnectionPool[Any],
        **kwargs: Unpack[options.PoolOptions],
    ) -> PostgresLedger:
        """Whatever the pool's session defaults: each spend is its own framed transaction."""
        config = options.PgConfig(**kwargs)
        ledger = cls(pool, config, owns_pool=False)
        return ledger._start(f"{pool.name or 'host pool'} table={config.qualified}")

    def _start(self, location: str) -> PostgresLedger:
        steps = decisions.open_ledger(self._st, location, self._password, self._due())
        try:
            if self._conninfo is None:
                opened = run_steps(steps, self._run)
            else:  # one direct connection: a failure shows libpq's reason, not a pool timeout
                with self._fresh(self._due()) as conn:
                    opened = run_steps(steps, lambda op: self._on(conn, op, op.due))
        except BaseException:
            self.close()
            raise
        self._opened(opened)
        return self

    def _run(self, op: Op) -> Row:
        left = self._ready(op)
        if self._pool_to_open:
            self._pool.open(wait=False)  # idempotent: concurrent callers are fine
            self._pool_to_open = False
        try:
            if op.fresh and self._conninfo is not None:
                with self._fresh(op.due) as conn:
                    row = self._on(conn, op, op.due)
            else:  # getconn/putconn: _on gives the session back as it came
                pool = self._pool
                conn = pool.getconn(left)
                try:
                    row = self._on(conn, op, self._answer_due(op))
                finally:
                    pool.putconn(conn)
        except Exception as exc:
            self._failed(op, exc)
            raise
        return self._answered(op, row)

    @contextmanager
    def _fresh(self, due: float) -> Iterator[Conn]:
        assert self._conninfo is not None
        try:
            conn = connect_within(self._conninfo, due - time.monotonic())
        except Exception as exc:  # libpq, psycopg's host resolution (idna), the OS, time
            raise errors.unavailable("connecting", exc, self._password) from exc
        try:
            yield conn
        finally:
            conn.close()

    def _on(self, conn: Conn, op: Op, due: float) -> Row:
        host_autocommit, deadline = conn.autocommit, self._taken(conn, due)
        try:
            with deadline:
                if not host_autocommit:
                    conn.autocommit = True  # a host's session: our script brings its own
                return run_op(conn, op)
        finally:
            if deadline.expired:
                conn.close()  # its socket is shut: the pool must not hand it out again
            else:
                rollback, reset = self._as_found(conn, host_autocommit)
                try:
                    if rollback:
                        conn.rollback()
                    if reset:
                        conn.autocommit = host_autocommit
                except psycopg.Error:
                    conn.close()  # the pool replaces a closed connection

    def doctor_checks(self) -> list[Check]:
        settings = self._drive(decisions.doctor_settings(self._due(), self._password))
        driver = (psycopg.__version__, psycopg.pq.version())
        return identity.doctor_checks(self._doctor_opened, settings, self._config, *driver)

    def _drive(self, steps: decisions.Steps) -> Any:
        return run_steps(steps, self._run)

    def spend_many(self, request_ids: Sequence[str]) -> list[bool]:
        """One multi-row INSERT per 1000 ids."""
        return list(self._drive(self._spend_many_steps(request_ids)))

    def is_spent_many(self, request_ids: Sequence[str]) -> list[bool]:
        return list(self._drive(self._spent_among_steps(request_ids)))

    def lineage(self) -> list[str]:
        return list(self._drive(self._lineage_steps()))

    def reidentify(self) -> None:
        """A fresh genesis for this namespace, e.g. after a restore (``Reidentifiable``)."""
        self._reidentify()

    def close(self) -> None:
        if self._closing() and self._owns_pool:
            self._pool.close()
