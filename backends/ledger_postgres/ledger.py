"""The sync PostgreSQL ledger: a thin shell that performs :mod:`.decisions`' requests
on psycopg (every decision about an op is ``decisions.GuardedShell``'s)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg.rows import tuple_row
from psycopg_pool import ConnectionPool

from ledger_core.base import ReentrantLedgerBase
from ledger_core.doctor import Check
from ledger_core.steps import run_steps

from . import commands, decisions, errors, identity, options
from .commands import Op, Prepared, Row, Statements
from .watchdog import Watchdog

if TYPE_CHECKING:
    from typing_extensions import Unpack

Conn = psycopg.Connection[Any]


def run_op(conn: Conn, op: Op) -> Row:
    """Send one op's message and read the answer it names."""
    # The hot path, straight through libpq: psycopg's public cursor cost 26-110 us more
    # client CPU per call (25-60%), and cannot resend the session's settings with a
    # PREPARE after a pooler's reset (test_statements_gone_from_a_live_session_...).
    if type(op.query) is Prepared:
        with conn.lock:
            return conn.wait(commands.prepared_gen(conn, op))
    # Our own cursor class and row shape, whatever factories the host's pool configured.
    cur = psycopg.Cursor(conn, row_factory=tuple_row)
    # Never prepared, whatever the host's prepare_threshold says: a script cannot be, and
    # a batch statement's generic plan, made while the table was young (a scan of the
    # whole namespace, ANY() a filter), stayed with the session as the table grew, so a
    # first migration went quadratic (2,000 ids/s). Each run is planned with its values
    # and the table's size now; the hot statements (Prepared) are one index probe at
    # any size, generic or not.
    cur.execute(op.query, op.params, prepare=False)
    if op.counted or op.result is None:
        return commands.counted(cur, op)
    for _ in range(op.result):
        cur.nextset()
    return cur.fetchone()


def connect_within(conninfo: str, seconds: float) -> Conn:
    """A new autocommit connection, or :class:`errors.OutOfTime` after ``seconds``.

    libpq's ``connect_timeout`` has a 2 s floor and counts per host, so a call's own
    deadline is kept here: the connection is made on a helper thread, and one that
    arrives too late is closed by that thread.
    """
    box: dict[str, Any] = {}
    lock = threading.Lock()
    done = threading.Event()

    def attempt() -> None:
        try:
            conn = psycopg.connect(conninfo, autocommit=True)
        except BaseException as exc:  # handed to the caller, which maps it
            box["error"] = exc
        else:
            with lock:
                if box.get("abandoned"):
                    conn.close()
                else:
                    box["conn"] = conn
        finally:
            done.set()

    threading.Thread(target=attempt, name="ledger-postgres-connect", daemon=True).start()
    done.wait(max(0.0, seconds))
    with lock:
        if "conn" in box:
            conn: Conn = box["conn"]
            return conn
        if "error" in box:
            raise box["error"]
        box["abandoned"] = True
    raise errors.OutOfTime(f"no connection within the call's timeout ({seconds:.2f} s left)")


class PostgresLedger(decisions.GuardedShell, ReentrantLedgerBase):
    """A ledger in a PostgreSQL table: one ``INSERT ... ON CONFLICT`` per spend.

    Open it with ``open_ledger("postgresql://...")`` (the ledger then owns its pool) or
    :meth:`from_pool` on a pool the host already has (never closed by the ledger).
    """

    _watchdog_class = Watchdog
    _pool_class = ConnectionPool

    @classmethod
    def from_target(cls, target: options.Target) -> PostgresLedger:
        script = Statements(target.config).session_script()

        def configure(conn: Conn) -> None:
            # One round trip: a new session is set up while a call may be waiting for it.
            conn.execute(script)

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
        """A ledger on the host's pool, whatever its sessions' defaults (isolation,
        autocommit, row factory): each spend runs in its own framed transaction."""
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

    # -- I/O ---------------------------------------------------------------------

    def _run(self, op: Op) -> Row:
        left = self._ready(op)
        if self._pool_to_open:
            self._pool.open(wait=False)  # idempotent: concurrent callers are fine
            self._pool_to_open = False
        try:
            if self._on_own(op):
                with self._fresh(op.due) as conn:
                    row = self._on(conn, op, op.due)
            else:  # getconn/putconn: _on leaves the session as it came, so the pool's
                # connection() context (a commit() call, a generator) would only cost
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
        """Run ``op`` on ``conn`` under its deadline, and give ``conn`` back as it came."""
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

    # -- the ledger: each call runs its decision --------------------------------

    def doctor_checks(self) -> list[Check]:
        """``decision-ledger doctor``'s versions and configuration lines: the facts read
        at open, and one read-only query for the server's version and defaults."""
        settings = self._drive(decisions.doctor_settings(self._due(), self._password))
        driver = (psycopg.__version__, psycopg.pq.version())
        return identity.doctor_checks(self._doctor_opened, settings, self._config, *driver)

    def _drive(self, steps: decisions.Steps) -> Any:
        return run_steps(steps, self._run)

    def _spend(self, request_id: bytes) -> bool:
        return bool(self._drive(self._spend_steps(request_id)))

    def _spend_as(self, request_id: bytes, digest: bytes) -> bool:
        return bool(self._drive(self._spend_as_steps(request_id, digest)))

    def _is_spent(self, request_id: bytes) -> bool:
        return bool(self._drive(self._is_spent_steps(request_id)))

    def spent_ids(self) -> Iterator[str]:
        """Every id spent in this namespace, in byte order, a page per round trip
        (what ``ledger_core.migrate`` reads from a source)."""
        return self._pages("ids")

    def namespaces(self) -> Iterator[str]:
        """Every namespace of this table, own included, in byte order, a page per
        round trip (``NamespaceListing``)."""
        return self._pages("namespaces")

    def _pages(self, what: str) -> Iterator[str]:
        after: bytes | None = b""
        while after is not None:
            names, after = self._drive(self._page_steps(what, after))
            yield from names

    def spend_many(self, request_ids: Sequence[str]) -> list[bool]:
        """Spend a batch: one multi-row INSERT per 1000 ids, each id's answer
        as :meth:`spend` would give it (``True`` only if this call recorded it)."""
        return list(self._drive(self._spend_many_steps(request_ids)))

    def is_spent_many(self, request_ids: Sequence[str]) -> list[bool]:
        """Read a batch: one guarded statement per 1000 ids."""
        return list(self._drive(self._spent_among_steps(request_ids)))

    def lineage(self) -> list[str]:
        """The store_ids this store was migrated from (its lineage markers)."""
        return list(self._drive(self._lineage_steps()))

    def close(self) -> None:
        """Close what this ledger opened; in a forked child that has not rebuilt yet,
        nothing (everything it holds is the parent's)."""
        if self._closing() and self._owns_pool:
            self._pool.close()
