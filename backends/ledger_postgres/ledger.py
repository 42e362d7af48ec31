# Generated from aio.py by scripts/async_to_sync.py: edit that file, not this.
"""The PostgreSQL ledgers: one unique-key ``INSERT`` per spend, read top-down.

A spend is ``_spend`` -> ``_run`` (a connection, the deadline) -> ``_on`` (the driver
call); each statement proves the store it opened (:mod:`.statements`). The sync flavour
is generated from this file; the few real differences are marked ``if ASYNC:``.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg.pq import TransactionStatus
from psycopg.rows import tuple_row
from psycopg_pool import ConnectionPool

from ledger_core import forks, ids, notices
from ledger_core.base import ReentrantLedgerBase
from ledger_core.doctor import Check
from ledger_core.errors import LedgerClosed, LedgerError, Outcome, missing_namespace
from ledger_core.forks import PerProcess
from ledger_core.guard import Guard as Standing
from ledger_core.ids import MarkerKind, is_marker, marker_range, marker_subject
from ledger_core.listing import pages
from ledger_core.tokens import attempt_outcome, new_token
from ledger_core.watchdog import Watchdog

from . import errors, identity, options, replication
from .connect import connect_within
from .identity import Opened
from .options import PgConfig, PoolOptions, Target
from .statements import (
    BATCH_SIZE,
    DOCTOR_SETTINGS,
    FIRST_SHARE,
    IDENTITY_NAMESPACE,
    PAGE_SIZE,
    PROBE,
    SYSTEM_IDENTIFIER,
    Prepared,
    Query,
    Row,
    Statements,
    executed,
    new_identity_token,
)

if TYPE_CHECKING:
    from typing_extensions import Unpack


Conn = psycopg.Connection[Any]
_IDLE = TransactionStatus.IDLE


class PostgresLedger(ReentrantLedgerBase):
    """A ledger in a PostgreSQL table: one ``INSERT ... ON CONFLICT`` per spend; on its
    own pool (``open_ledger``) or a host's (:meth:`from_pool`, never closed). Once the
    store forgot, every later call fails closed (never adopting a new identity)."""

    _reentrant = False
    _pool_to_open = False  # a pool built after fork opens at its first use
    _doctor_opened: Opened  # what opening found, kept for the doctor

    def __init__(
        self,
        pool: Any,
        config: PgConfig,
        *,
        owns_pool: bool,
        conninfo: str | None = None,
        password: str | None = None,
        make_pool: Any = None,
    ) -> None:
        self._pool, self._config, self._owns_pool = pool, config, owns_pool
        self._conninfo, self._password = conninfo, password
        self._timeout = config.timeout
        self._st = Statements(config)
        self._framed, self._closed = not owns_pool, False
        # Failed for good (the SQL genesis guard is the statements'); no re-check: every
        # statement proves the store.
        self._standing = Standing(float("inf"))
        self._first_share = config.timeout * FIRST_SHARE
        self._watchdog = Watchdog(self._first_share)
        forked = options.forked_pool_kwargs  # a child's pool, like the host's
        self._make_pool = make_pool or (lambda: ConnectionPool(**forked(pool, config.timeout)))
        self._born = forks.generation
        self._process = PerProcess(None, self._forked)

    @classmethod
    def from_target(cls, target: Target) -> PostgresLedger:
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
    def from_pool(cls, pool: ConnectionPool[Any], **kwargs: Unpack[PoolOptions]) -> PostgresLedger:
        """Whatever the pool's session defaults: each call is its own framed transaction."""
        config = PgConfig(**kwargs)
        ledger = cls(pool, config, owns_pool=False)
        return ledger._start(f"{pool.name or 'host pool'} table={config.qualified}")

    @classmethod
    def setup_target(cls, target: Target) -> Opened:
        """``setup``: create or upgrade on one direct connection; no pool, no deadline of
        ours (libpq's ``connect_timeout`` bounds the connecting)."""
        kwargs = {"conninfo": target.conninfo, "password": target.password}
        ledger = cls(None, target.config, owns_pool=False, **kwargs)
        due = time.monotonic() + 86400.0  # a day: effectively none
        try:
            with ledger._fresh(due) as conn:
                return ledger._open(target.location, due, conn, setup=True)
        finally:
            ledger.close()

    def _start(self, location: str) -> PostgresLedger:
        due = self._due()
        try:
            if self._conninfo is None:
                opened = self._open(location, due, None)
            else:  # one direct connection: a failure shows libpq's reason, not a pool timeout
                with self._fresh(due) as conn:
                    opened = self._open(location, due, conn)
        except BaseException:
            self.close()
            raise
        self._doctor_opened, self._info = opened, opened.info
        self._reentrant = opened.reentrant
        self._st = self._st.guarded(opened.guard, opened.reentrant)
        return self

    def _open(self, location: str, due: float, conn: Conn | None, setup: bool = False) -> Opened:
        """Check server and table, create or upgrade the table if allowed, read (or write,
        first opener wins) the genesis row, and derive ``store_id`` and the guard."""
        st, config = self._st, self._config
        qualified = config.qualified
        try:
            probe_row = self._run(PROBE, (st.regclass_text,) * 4, due, conn=conn)
            probe = identity.probe_from_row(probe_row)
            if probe.in_recovery:
                raise errors.standby_error(f"opening ledger {qualified}")
            if probe.table_oid is None or setup or (config.create and not probe.has_attempt_column):
                if not (config.create or setup):
                    raise errors.missing_table(qualified)
                self._run(st.ddl(), None, due, None, conn=conn)
                probe_row = self._run(PROBE, (st.regclass_text,) * 4, due, conn=conn)
                probe = identity.probe_from_row(probe_row)
            topology = replication.topology_from_row(self._run(st.topology, None, due, conn=conn))
            system_identifier = None
            if probe.may_read_control:
                row = self._run(SYSTEM_IDENTIFIER, None, due, conn=conn)
                system_identifier = str(row[0])
            # Read first: a role that may only SELECT opens a namespace that has its genesis.
            row = self._run(st.read_genesis, None, due, conn=conn)
            if row[0] is None:
                row = self._create_genesis(row, location, due, conn, setup)
            genesis, xmin = bytes(row[0]), int(row[1])
        except LedgerError:
            raise
        except Exception as exc:
            raise errors.unavailable(f"opening ledger {qualified}", exc, self._password) from exc
        return identity.ledger_info(
            dataclasses.replace(probe, topology=topology),
            config,
            location,
            system_identifier=system_identifier,
            genesis=genesis,
            xmin=xmin,
        )

    def _create_genesis(
        self, found: Any, location: str, due: float, conn: Conn | None, setup: bool
    ) -> Any:
        """The namespace's genesis row, written if allowed (first opener wins; an older
        table's namespace takes its old token: its store_id stays)."""
        config = self._config
        upgrade = found[2] is not None and bool(found[3])
        if not (config.create or setup):
            if upgrade:
                why = "made by an older version"
                raise errors.missing_genesis(config.qualified, config.namespace, why)
            raise missing_namespace(config.namespace, f"in ledger table {config.qualified}")
        token = new_identity_token()
        write, answer = self._st.genesis_row(token, upgrade)
        try:
            row = self._run(write, None, due, answer, conn=conn)
        except Exception as exc:
            if errors.classify(exc) is not Outcome.REJECTED:
                raise
            why = errors.detail(exc, self._password)
            raise errors.missing_genesis(config.qualified, config.namespace, why) from exc
        if bytes(row[0]) == token:  # ours, not a racing opener's (nor an upgrade's)
            notices.created(location, config.namespace)
        return row

    def _spend(self, request_id: bytes, digest: bytes | None = None) -> bool:
        """One statement: its row count (own pool) or returned row (a host's) answers;
        an unknown outcome is settled on a new connection (C5)."""
        due = time.monotonic() + self._timeout
        token = new_token()
        values = (request_id, token) if digest is None else (request_id, token, digest)
        st = self._st
        try:
            if self._framed:
                found = self._run(st.spend_framed(*values), None, due, st.FRAMED_RESULT, True)
                return found is not None
            name = st.spend_prepared if digest is None else st.spend_as_prepared
            result = self._run(name, (st.namespace, *values), due, first=True)
            return bool(result.command_tuples)
        except Exception as exc:
            return self._settle(exc, values, due)

    def _spend_as(self, request_id: bytes, digest: bytes) -> bool:
        if not self._reentrant:
            raise errors.missing_attempt_column(self._config.qualified)
        return self._spend(request_id, digest)

    def _settle(self, first: Exception, values: tuple[bytes, ...], due: float) -> bool:
        """After an unknown outcome, the same write again on a new connection, then whose
        token (or digest) is stored; only if that fails too is the spend ambiguous."""
        self._unless_unknown("spend", first)
        st, token = self._st, values[1]
        digest = values[2] if len(values) > 2 else None
        try:
            row = self._run(st.settle(*values), None, due, st.SETTLE_RESULT, fresh=True)
        except errors.StoreChanged:
            raise
        except Exception as exc:
            raise errors.ambiguous(first, exc, self._password) from first
        if row is None:  # the settling INSERT would have stored ours: nothing is proven
            raise errors.ambiguous(first, None, self._password) from first
        outcome = attempt_outcome(None if row[0] is None else bytes(row[0]), token)
        if outcome is False and digest is not None:
            return row[1] is not None and bytes(row[1]) == digest
        return bool(outcome)

    def _is_spent(self, request_id: bytes) -> bool:
        """One indexed read, proving the genesis; after a lost connection, once more."""
        due = time.monotonic() + self._timeout
        st = self._st
        try:
            if self._framed:
                row = self._run(st.is_spent_framed(request_id), None, due, st.FRAMED_RESULT, True)
            else:
                params = (st.namespace, request_id)
                result = self._run(st.is_spent_prepared, params, due, first=True)
                row = (result.get_value(0, 0) == b"\x01",) if result.ntuples else None
        except Exception as first:
            self._unless_unknown("is_spent", first)
            again: tuple[bytes, ...] | None = None  # a framed script carries its values
            query, result_set = st.is_spent_framed(request_id), st.FRAMED_RESULT
            if not self._framed:
                query, again, result_set = st.is_spent, (st.namespace, request_id), 0
            try:
                row = self._run(query, again, due, result_set, fresh=True)
            except LedgerError:
                raise
            except Exception as exc:
                raise errors.unavailable("is_spent", exc, self._password) from exc
        return bool(self._proven(row)[0])

    def _run(
        self,
        query: Query,
        params: tuple[Any, ...] | None,
        due: float,
        result: int | None = 0,
        first: bool = False,
        *,
        fresh: bool = False,
        conn: Conn | None = None,
    ) -> Any:
        """One message on ``conn``, a pooled connection, or (``fresh``) a new one: a
        prepared statement's result, else the first row of result set ``result``.
        A ``first`` attempt's answer gets a share of the timeout (the rest is for a
        settle or re-read). A spend's NULL token (no genesis row) fails the ledger."""
        left = self._ready(due)
        try:
            if conn is not None:
                return self._on(conn, query, params, result, due)
            if fresh and self._conninfo is not None:
                with self._fresh(due) as conn:
                    return self._on(conn, query, params, result, due)
            if self._pool_to_open:
                self._pool.open(wait=False)  # idempotent: concurrent callers are fine
                self._pool_to_open = False
            pool = self._pool
            conn = pool.getconn(left)
            try:
                answer_due = min(due, time.monotonic() + self._first_share) if first else due
                return self._on(conn, query, params, result, answer_due)
            finally:
                pool.putconn(conn)
        except Exception as exc:
            if errors.is_guard_failure(exc):
                raise self._standing.fail(errors.store_changed(self._config.qualified)) from exc
            raise

    def _on(
        self,
        conn: Conn,
        query: Query,
        params: tuple[Any, ...] | None,
        result: int | None,
        due: float,
    ) -> Any:
        """The driver call, under a deadline on the socket, and the session given back as
        it came (a host's autocommit, no open transaction); a closed one is replaced."""
        if conn.pgconn.parameter_status(b"in_hot_standby") == b"on":  # 14+: free to ask
            raise errors.standby_error(f"ledger {self._config.qualified}")
        host_autocommit = conn.autocommit
        ticket = self._watchdog.arm(conn.fileno(), due)
        expired = False
        try:
            try:
                if not host_autocommit:
                    conn.set_autocommit(True)  # a host's session: our script brings its own
                if type(query) is Prepared:
                    assert params is not None
                    with conn.lock:
                        return conn.wait(executed(conn, query, params))
                cursor = psycopg.Cursor(conn, row_factory=tuple_row)  # whatever the host's
                # Never prepared: a batch statement's generic plan, made while the table was
                # young, stayed as it grew and a first migration went quadratic.
                cursor.execute(query, params, prepare=False)
                if result is None:
                    return None
                for _ in range(result):
                    cursor.nextset()
                return cursor.fetchone()
            finally:
                expired = self._watchdog.disarm(ticket)
        except Exception as exc:
            if expired:  # what the driver raised is its cause
                raise errors.DeadlineExceeded(f"no answer within {self._timeout} s") from exc
            raise
        finally:
            if expired:
                conn.close()  # its socket is shut: the pool must not hand it out
            elif conn.autocommit != host_autocommit or conn.pgconn.transaction_status != _IDLE:
                self._give_back(conn, host_autocommit)

    @staticmethod
    def _give_back(conn: Conn, autocommit: bool) -> None:
        if conn.closed:
            return
        try:
            if conn.pgconn.transaction_status != _IDLE:
                conn.rollback()
            if conn.autocommit != autocommit:
                conn.set_autocommit(autocommit)
        except psycopg.Error:
            conn.close()  # the pool replaces a closed connection

    @contextmanager
    def _fresh(self, due: float) -> Iterator[Conn]:
        """A new autocommit connection within the call's time (libpq's own
        ``connect_timeout`` has a 2 s floor)."""
        assert self._conninfo is not None
        try:
            conn = connect_within(self._conninfo, due - time.monotonic())
        except Exception as exc:  # libpq, psycopg's host resolution (idna), the OS, time
            raise errors.unavailable("connecting", exc, self._password) from exc
        try:
            yield conn
        finally:
            conn.close()

    def _ready(self, due: float) -> float:
        """Seconds left before ``due``, if the call may run at all (in a forked child, on
        its own pool and watchdog)."""
        if self._born != forks.generation:
            self._process.get()
        if self._closed:
            raise LedgerClosed(f"ledger {self._config.qualified} is closed")
        if self._standing.failed is not None:
            self._standing.check()
        left = due - time.monotonic()
        if left <= 0:
            raise errors.OutOfTime("the call's timeout has passed")
        return left

    def _forked(self) -> None:
        """A forked child drops (never closes) the parent's pool and watchdog, builds its own."""
        self._watchdog = Watchdog(self._first_share)
        self._pool = self._make_pool()
        self._owns_pool = self._pool_to_open = True
        self._born = forks.generation

    def _unless_unknown(self, what: str, exc: Exception) -> None:
        """Raise what ``exc`` proves; return only when the outcome is unknown."""
        if isinstance(exc, LedgerError):
            raise exc
        if errors.classify(exc) is not Outcome.UNKNOWN:
            raise errors.unavailable(what, exc, self._password) from exc

    def _proven(self, row: Row) -> tuple[Any, ...]:
        """A guarded read's row; none: the genesis is gone or changed (fails for good)."""
        if row is None:
            raise self._standing.fail(errors.store_changed(self._config.qualified))
        return row

    def _due(self) -> float:
        return time.monotonic() + self._timeout

    def _listed(self, query: Query, params: tuple[Any, ...]) -> list[bytes]:
        """A guarded read's ids (an array), or the reason it failed."""
        try:
            row = self._run(query, params, self._due())
        except LedgerError:
            raise
        except Exception as exc:
            raise errors.unavailable("listing", exc, self._password) from exc
        values = self._proven(row)[0]
        return [] if values is None else [bytes(value) for value in values]

    def spent_ids(self) -> Iterator[str]:
        """Every id spent in this namespace, in byte order, a page per round trip."""
        return pages(lambda after: self._page(True, after), b"")

    def namespaces(self) -> Iterator[str]:
        """Every namespace of this table, own included, in byte order."""
        return pages(lambda after: self._page(False, after), b"")

    def _page(self, ids: bool, after: bytes) -> tuple[list[str], bytes | None]:
        """The spent ids (else the namespaces) after ``after``, and where the next page
        starts (``None``: done)."""
        st = self._st
        if ids:
            raws = self._listed(st.page, (st.namespace, after, PAGE_SIZE))
        else:
            raws = self._listed(st.namespaces, (after, PAGE_SIZE))
        hidden = is_marker if ids else IDENTITY_NAMESPACE.__eq__
        names = [raw.decode("utf-8") for raw in raws if not hidden(raw)]
        return names, (raws[-1] if len(raws) == PAGE_SIZE else None)

    def spend_many(self, request_ids: Sequence[str]) -> list[bool]:
        """One multi-row INSERT per 1000 ids (on a host's pool, a spend each)."""
        out: list[bool] = []
        for chunk in ids.id_batches(request_ids, BATCH_SIZE):
            if self._framed:
                out += [self._spend(rid) for rid in chunk]
                continue
            params = (self._st.namespace, new_token(), chunk)
            try:
                row = self._run(self._st.spend_many, params, self._due(), first=True)
            except Exception as exc:
                # Never settled id by id: ambiguous for the whole batch (safe to re-run).
                self._unless_unknown("spend_many", exc)
                raise errors.ambiguous(exc, None, self._password) from exc
            out += ids.first_wins(chunk, [] if row[0] is None else [bytes(rid) for rid in row[0]])
        return out

    def is_spent_many(self, request_ids: Sequence[str]) -> list[bool]:
        out: list[bool] = []
        for chunk in ids.id_batches(request_ids, BATCH_SIZE):
            spent = set(self._listed(self._st.spent_among, (self._st.namespace, chunk)))
            out += [rid in spent for rid in chunk]
        return out

    def lineage(self) -> list[str]:
        low, high = marker_range(MarkerKind.LINEAGE)
        params = (self._st.namespace, low, high)
        raws = self._listed(self._st.marker_range, params)
        return [marker_subject(MarkerKind.LINEAGE, raw) for raw in raws]

    def doctor_checks(self) -> list[Check]:
        try:
            row = self._run(DOCTOR_SETTINGS, None, self._due())
        except Exception as exc:
            what = "reading the server's settings"
            raise errors.unavailable(what, exc, self._password) from exc
        settings = identity.settings_from_row(row)
        driver = (psycopg.__version__, psycopg.pq.version())
        return identity.doctor_checks(self._doctor_opened, settings, self._config, *driver)

    @classmethod
    def preflight(cls, target: Target) -> list[Check]:
        """``decision-ledger doctor`` before ``setup``: the server's settings read on
        one connection as an open reads them; nothing is written."""
        kwargs = {"conninfo": target.conninfo, "password": target.password}
        ledger = cls(None, target.config, owns_pool=False, **kwargs)
        st, due = ledger._st, ledger._due()
        try:
            with ledger._fresh(due) as conn:
                row = ledger._run(PROBE, (st.regclass_text,) * 4, due, conn=conn)
                topology = ledger._run(st.topology, None, due, conn=conn)
                settings = ledger._run(DOCTOR_SETTINGS, None, due, conn=conn)
        except LedgerError:
            raise
        except Exception as exc:
            what = "reading the server's settings"
            raise errors.unavailable(what, exc, target.password) from exc
        finally:
            ledger.close()
        probe = identity.probe_from_row(row)
        probe = dataclasses.replace(probe, topology=replication.topology_from_row(topology))
        driver = (psycopg.__version__, psycopg.pq.version())
        found = identity.settings_from_row(settings)
        return identity.preflight_checks(probe, found, target.config, *driver)

    def reidentify(self) -> None:
        """A fresh genesis for this namespace, e.g. after a restore (``Reidentifiable``);
        then this ledger, like every other opened before, fails closed."""
        script = self._st.reidentify(new_identity_token())
        try:
            self._proven(self._run(script, None, self._due(), self._st.FRAMED_RESULT))
        except LedgerError:
            raise
        except Exception as exc:
            raise errors.unavailable("reidentify", exc, self._password) from exc
        self._standing.fail(errors.store_changed(self._config.qualified))

    def close(self) -> None:
        self._closed = True
        if self._process.inherited():
            return  # a child yet to rebuild: what it holds is the parent's
        self._watchdog.stop()
        if self._owns_pool:
            self._pool.close()
