"""The sync PostgreSQL ledger: a thin shell that runs :mod:`.decisions` on psycopg."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import generators
from psycopg.pq import TransactionStatus
from psycopg.rows import tuple_row
from psycopg_pool import ConnectionPool

from ledger_core.base import ReentrantLedgerBase
from ledger_core.doctor import Check
from ledger_core.ids import validate_request_id
from ledger_core.steps import run_steps

from . import commands, decisions, errors, identity, options
from .commands import BINARY, FIRST_SHARE, Op, Prepared, Row, Statements, prepared_answer
from .identity import in_hot_standby
from .watchdog import Watchdog

if TYPE_CHECKING:
    from typing_extensions import Unpack

Conn = psycopg.Connection[Any]
PoolFactory = Callable[[], "ConnectionPool[Any]"]

# Rebuilding after fork happens once per ledger, under a lock that is new in every
# child (a lock inherited from the parent may have been held by a thread that the
# child does not have).
_fork_lock = threading.Lock()


def _new_fork_lock() -> None:
    global _fork_lock
    _fork_lock = threading.Lock()


os.register_at_fork(after_in_child=_new_fork_lock)


def run_op(conn: Conn, op: Op) -> Row:
    """Send one op's message and read the answer it names."""
    if type(op.query) is Prepared:  # the hot path: straight through libpq
        pgconn, params = conn.pgconn, op.params
        assert params is not None
        with conn.lock:
            setup = commands.unprepared(conn, op.query)
            if setup is not None:  # this session's first use of it: its error is the call's
                pgconn.send_query(setup)
                commands.prepared_now(conn.wait(generators.execute(pgconn)), op.query, conn)
            pgconn.send_query_prepared(op.query, params, BINARY[: len(params)], 1)
            results = conn.wait(generators.execute(pgconn))
        return prepared_answer(results, op, conn)
    # Our own cursor class and row shape, whatever factories the host's pool configured.
    cur = psycopg.Cursor(conn, row_factory=tuple_row)
    # Never prepared, whatever the host's prepare_threshold says: a script cannot be, and
    # a batch statement's generic plan, made while the table was young (a scan of the
    # whole namespace, ANY() a filter), stayed with the session as the table grew, so a
    # first migration went quadratic (2,000 ids/s). Each run is planned with its values
    # and the table's size now; the hot statements (Prepared) are one index probe at
    # any size, generic or not.
    cur.execute(op.query, op.params, prepare=False)
    if op.counted:
        return () if cur.rowcount > 0 else None
    if op.result is None:
        return None
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


def _child_pool(host: ConnectionPool[Any], timeout: float) -> PoolFactory:
    """In a forked child, a pool like the host's (see ``options.forked_pool_kwargs``)."""
    return lambda: ConnectionPool(**options.forked_pool_kwargs(host, timeout))


class PostgresLedger(decisions.GuardedShell, ReentrantLedgerBase):
    """A ledger in a PostgreSQL table: one ``INSERT ... ON CONFLICT`` per spend.

    Open it with ``open_ledger("postgresql://...")`` (the ledger then owns its pool) or
    :meth:`from_pool` on a pool the host already has (never closed by the ledger).
    """

    def __init__(
        self,
        pool: ConnectionPool[Any],
        config: options.PgConfig,
        *,
        owns_pool: bool,
        conninfo: str | None = None,
        location: str = "",
        password: str | None = None,
        make_pool: PoolFactory | None = None,
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
        self._first_share = config.timeout * FIRST_SHARE
        self._forks = decisions.forks
        self._make_pool = make_pool or _child_pool(pool, config.timeout)
        self._watchdog = Watchdog(self._first_share, "ledger-postgres-deadlines")
        steps = decisions.open_ledger(self._st, location, password, self._due())
        try:
            if conninfo is None:
                opened = run_steps(steps, self._run)
            else:  # one direct connection: a failure shows libpq's reason, not a pool timeout
                with self._fresh(self._due()) as conn:
                    opened = run_steps(steps, lambda op: self._on(conn, op, op.due))
        except BaseException:
            self.close()
            raise
        self._opened(opened)

    @classmethod
    def from_target(cls, target: options.Target) -> PostgresLedger:
        opened: list[PostgresLedger] = []  # the pool opens (and connects) after open

        def configure(conn: Conn) -> None:
            # One round trip: a new session is set up while a call may be waiting for it.
            conn.execute(opened[0]._st.session_script())

        def make_pool() -> ConnectionPool[Any]:
            return ConnectionPool(**target.pool_kwargs(), configure=configure)

        pool = make_pool()
        ledger = cls(
            pool,
            target.config,
            owns_pool=True,
            conninfo=target.conninfo,
            location=target.location,
            password=target.password,
            make_pool=make_pool,
        )
        opened.append(ledger)
        pool.open(wait=False)  # only once the server has been found fit
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
        name = pool.name or "host pool"
        return cls(pool, config, owns_pool=False, location=f"{name} table={config.qualified}")

    # -- I/O ---------------------------------------------------------------------

    def _run(self, op: Op) -> Row:
        """Run one op before its call's deadline; a store that forgot fails this ledger
        for good.

        Waiting for a pooled connection sends nothing, so it may take the whole call; a
        ``first`` attempt's answer is then awaited for a share of the timeout at most,
        which leaves the rest for a settle or a re-read on a new connection.
        """
        if self._forks != decisions.forks:
            self._after_fork()
        left = self._time_left(op.due)
        try:
            if op.fresh and self._conninfo is not None:
                with self._fresh(op.due) as conn:
                    row = self._on(conn, op, op.due)
            else:  # getconn/putconn: _on leaves the session as it came, so the pool's
                # connection() context (a commit() call, a generator) would only cost
                pool = self._pool
                conn = pool.getconn(left)
                try:
                    due = min(op.due, time.monotonic() + self._first_share) if op.first else op.due
                    row = self._on(conn, op, due)
                finally:
                    pool.putconn(conn)
        except Exception as exc:
            self._check_outcome(op, None, exc)
            raise
        self._check_outcome(op, row, None)
        return row

    def _after_fork(self) -> None:
        """In a forked child: never touch what the parent's ledger held.

        The pool, its connections (their sockets are shared with the parent), its
        worker threads and the watchdog thread are the parent's: they are dropped, not
        closed (closing would end the parent's sessions; psycopg does not end a
        connection that is garbage collected in another process). The child builds a
        pool and a watchdog of its own, lazily, here.
        """
        with _fork_lock:
            if self._forks == decisions.forks:
                return
            self._watchdog = Watchdog(self._first_share, "ledger-postgres-deadlines")
            self._pool = self._make_pool()
            self._pool.open(wait=False)
            self._owns_pool = True
            self._forks = decisions.forks

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
        """Run ``op`` on ``conn`` under a deadline, and give ``conn`` back as it came,
        whatever ends the call (an error, KeyboardInterrupt): disarmed first, so a
        deadline can never shut a socket that is no longer this op's."""
        if in_hot_standby(conn.pgconn.parameter_status(b"in_hot_standby")):
            raise errors.standby_error(f"ledger {self._config.qualified}")
        host_autocommit = conn.autocommit
        ticket: int | None = None
        expired = False
        try:
            if not host_autocommit:
                conn.autocommit = True  # a host's session: our script brings its own
            ticket = self._watchdog.arm(conn.fileno(), due)
            return run_op(conn, op)
        except Exception as exc:
            expired, ticket = ticket is not None and self._watchdog.disarm(ticket), None
            if expired:
                raise self._deadline_passed() from exc
            raise
        finally:
            if ticket is not None:
                expired = self._watchdog.disarm(ticket)
            if expired:
                conn.close()  # its socket is shut: the pool must not hand it out again
            elif not host_autocommit or conn.pgconn.transaction_status != TransactionStatus.IDLE:
                _tidy(conn, host_autocommit)

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
        raws = [validate_request_id(r) for r in request_ids]
        return list(self._drive(self._spend_many_steps(raws)))

    def is_spent_many(self, request_ids: Sequence[str]) -> list[bool]:
        """Read a batch: one guarded statement per 1000 ids."""
        raws = [validate_request_id(r) for r in request_ids]
        return list(self._drive(self._spent_among_steps(raws)))

    def lineage(self) -> list[str]:
        """The store_ids this store was migrated from (its lineage markers)."""
        return list(self._drive(self._lineage_steps()))

    def close(self) -> None:
        """Close what this ledger opened; in a forked child that has not rebuilt yet,
        nothing (everything it holds is the parent's)."""
        if self._closing() and self._owns_pool:
            self._pool.close()
