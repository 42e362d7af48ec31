"""Open, spend, spend_as, is_spent and the listings, decided once as step generators.

Each generator yields an :class:`~.commands.Op` (one message, one round trip), receives
the row it asked for or has the driver's exception thrown into it, and returns the
result. ``ledger_core.steps.run_steps`` (sync) and ``run_steps_async`` drive the same
generators, so every decision (settle, re-read, error mapping, the store that forgot)
is made here, identically for both shells (C9). Each call's first op carries the
call's one deadline (``due``); the shells only run ops before it.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from collections.abc import Generator, Sequence
from typing import Any

from psycopg.pq import TransactionStatus

from ledger_core.errors import LedgerClosed, LedgerError
from ledger_core.ids import MarkerKind, is_marker, marker_range, marker_subject, validate_request_id
from ledger_core.tokens import attempt_outcome, new_token

from . import errors, identity, options, replication
from .commands import (
    BATCH_SIZE,
    DOCTOR_SETTINGS,
    FIRST_SHARE,
    IDENTITY_NAMESPACE,
    PAGE_SIZE,
    PROBE,
    SYSTEM_IDENTIFIER,
    Op,
    Row,
    Statements,
    new_identity_token,
)
from .errors import Failure
from .identity import Opened
from .options import PgConfig
from .watchdog import LoopWatchdog, Watchdog

Steps = Generator[Op, Row, Any]


def open_ledger(
    st: Statements, location: str, password: str | None, due: float, *, setup: bool = False
) -> Steps:
    """Check the server and the table, create the table (or add C10's column) if
    allowed, read (or write, first opener wins) the genesis row, derive ``store_id``
    and the guard. One deadline (``due``) for the whole open."""
    config: PgConfig = st.config
    qualified = config.qualified
    try:
        probe_op = Op(PROBE, (st.regclass_text,) * 3, due=due)
        row = yield probe_op
        assert row is not None
        probe = identity.probe_from_row(row)
        if probe.in_recovery:
            raise errors.standby_error(f"opening ledger {qualified}")
        missing = probe.table_oid is None
        if missing or setup or (config.create and not probe.has_attempt_column):
            if not (config.create or setup):
                raise errors.missing_table(config.qualified)
            yield Op(st.ddl(), result=None, due=due)
            row = yield probe_op
            assert row is not None
            probe = identity.probe_from_row(row)
        row = yield Op(st.topology, due=due)
        assert row is not None
        probe = dataclasses.replace(probe, topology=replication.topology_from_row(row))
        system_identifier = None
        if probe.may_read_control:
            row = yield Op(SYSTEM_IDENTIFIER, due=due)
            assert row is not None
            system_identifier = str(row[0])
        # Read first: a role that may only SELECT opens a namespace that has its genesis.
        row = yield Op(st.read_genesis, due=due)
        assert row is not None
        if row[0] is None:
            # An older table's namespace with records: upgraded (its store_id kept) only
            # where the table may be set up; otherwise refused with the fix.
            upgrade = row[1] is not None and bool(row[2])
            if upgrade and not (config.create or setup):
                raise errors.missing_genesis(
                    qualified, config.namespace, "made by an older version"
                )
            write, answer = st.genesis_row(new_identity_token(), upgrade)
            try:
                row = yield Op(write, result=answer, due=due)
            except Exception as exc:
                if errors.classify(exc) is not errors.Failure.REJECTED:
                    raise
                why = errors.detail(exc, password)
                raise errors.missing_genesis(qualified, config.namespace, why) from exc
            assert row is not None
        genesis = bytes(row[0])
    except LedgerError:
        raise
    except Exception as exc:
        raise errors.unavailable(f"opening ledger {config.qualified}", exc, password) from exc
    opened: Opened = identity.ledger_info(
        probe, config, location, system_identifier=system_identifier, genesis=genesis
    )
    return opened


def _unless_unknown(what: str, exc: Exception, pw: Any) -> None:
    """Raise what ``exc`` proves (a ``LedgerError`` as it is; a failure that recorded
    nothing as unavailable); return only when the outcome is unknown."""
    if isinstance(exc, LedgerError):
        raise exc
    if errors.classify(exc) is not Failure.UNKNOWN:
        raise errors.unavailable(what, exc, pw) from exc


def _settled(row: Row, token: bytes, digest: bytes | None) -> bool | None:
    """Whose write the settle found: ``True`` ours (or, for spend_as, the same key's),
    ``False`` another's, ``None`` nobody's (then nothing is proven)."""
    if row is None:
        return None
    outcome = attempt_outcome(None if row[0] is None else bytes(row[0]), token)
    if outcome is False and digest is not None:
        return row[1] is not None and bytes(row[1]) == digest
    return outcome


def _after_unknown(
    first: Exception, settle: Op, token: bytes, digest: bytes | None, pw: Any
) -> Steps:
    """After a spend's first attempt raised: settle an unknown outcome (C5).

    Settling runs the same write again with the same token (and digest) on a new
    connection, then reads whose token is stored: ours means this call recorded the id
    (in the first write or in this one), another token means another call did. Only if
    settling fails too is the spend ambiguous.
    """
    _unless_unknown("spend", first, pw)
    try:
        row = yield settle
    except errors.StoreChanged:
        raise
    except Exception as exc:
        raise errors.ambiguous(first, exc, pw) from first
    outcome = _settled(row, token, digest)
    if outcome is None:  # the settling INSERT would have stored ours: nothing is proven
        raise errors.ambiguous(first, None, pw) from first
    return outcome


def _sent(op: Op) -> Steps:
    """``op``'s answer; sent once more, only if the server said the session no longer
    has its prepared statement (a pooler's ``DISCARD ALL`` or ``DEALLOCATE``).

    An ``EXECUTE`` of a statement that does not exist fails before anything runs, so
    the second send (on a session the shell prepares first) is the only one that can
    apply: nothing is written twice. Any other failure, or the statement gone again,
    goes to the caller's mapping as it is.
    """
    try:
        return (yield op)
    except Exception as exc:
        if not errors.statement_gone(exc):
            raise
    return (yield op)


def spend(
    st: Statements,
    framed: bool,
    request_id: bytes,
    due: float,
    pw: Any,
    digest: bytes | None = None,
) -> Steps:
    """One INSERT; a row (or a row count of 1) means this call recorded the id (or, with
    C10's ``digest``, found the same digest stored: see ``commands._SPEND_AS``)."""
    token = new_token()
    values = (request_id, token) if digest is None else (request_id, token, digest)
    if framed:
        op = Op(st.spend_framed(*values), None, st.FRAMED_RESULT, first=True, due=due)
    else:
        prepared = st.spend_prepared if digest is None else st.spend_as_prepared
        op = Op(prepared, (st.namespace, *values), counted=True, first=True, due=due)
    try:
        row = yield from _sent(op)
    except Exception as exc:
        settle = Op(st.settle(*values), None, st.SETTLE_RESULT, fresh=True, due=due)
        return (yield from _after_unknown(exc, settle, token, digest, pw))
    return row is not None


def spend_as(
    st: Statements,
    framed: bool,
    reentrant: bool,
    request_id: bytes,
    digest: bytes,
    due: float,
    pw: Any,
) -> Steps:
    """C10: :func:`spend` with the key's digest, refused before any I/O on a table
    without the column."""
    if not reentrant:
        raise errors.missing_attempt_column(st.config.qualified)
    return (yield from spend(st, framed, request_id, due, pw, digest))


def is_spent(st: Statements, framed: bool, request_id: bytes, due: float, pw: Any) -> Steps:
    """One indexed read, from the genesis row: its one column says whether the id is
    recorded (no row: the store forgot, and the shell fails for good). On a lost
    connection, it reads once more on a new one."""
    if framed:
        query = st.is_spent_framed(request_id)
        op = Op(query, None, st.FRAMED_RESULT, guarded=True, first=True, due=due)
    else:
        params = (st.namespace, request_id)
        op = Op(st.is_spent_prepared, params, guarded=True, first=True, due=due)
    try:
        row = yield from _sent(op)
    except Exception as first:
        _unless_unknown("is_spent", first, pw)
        # On a new connection (not one of our pool's: nothing is prepared there).
        again = op if framed else op._replace(query=st.is_spent)
        try:
            row = yield again._replace(fresh=True, first=False)
        except LedgerError:
            raise
        except Exception as exc:
            raise errors.unavailable("is_spent", exc, pw) from exc
    assert row is not None  # guarded: the shell has failed an op without a row
    return bool(row[0])


def _listed(op: Op, pw: Any) -> Steps:
    """One listing op; its failures map to LedgerUnavailable (a listing records
    nothing, so nothing is ambiguous)."""
    try:
        row = yield op
    except LedgerError:
        raise
    except Exception as exc:
        raise errors.unavailable("listing", exc, pw) from exc
    assert row is not None  # guarded: the shell has failed an op without a row
    return [] if row[0] is None else [bytes(value) for value in row[0]]


def id_page(st: Statements, after: bytes, due: float, pw: Any) -> Steps:
    """The spent ids after ``after`` (``b""`` for the first: ids are never empty), in
    byte order, markers left out, and where the next page starts (``None``: this was
    the last). Keyset paging: memory stays flat for any table size."""
    params = (st.namespace, after, PAGE_SIZE)
    raws: list[bytes] = yield from _listed(Op(st.page, params, guarded=True, due=due), pw)
    ids = [raw.decode("utf-8") for raw in raws if not is_marker(raw)]
    return ids, (raws[-1] if len(raws) == PAGE_SIZE else None)


def namespace_page(st: Statements, after: bytes, due: float, pw: Any) -> Steps:
    """The table's namespaces after ``after`` (``b""`` first), in byte order, without
    the genesis row's (not UTF-8: no ledger's), and where the next page starts."""
    params = (after, PAGE_SIZE)
    raws: list[bytes] = yield from _listed(Op(st.namespaces, params, guarded=True, due=due), pw)
    names = [raw.decode("utf-8") for raw in raws if raw != IDENTITY_NAMESPACE]
    return names, (raws[-1] if len(raws) == PAGE_SIZE else None)


def spend_many(
    st: Statements, framed: bool, request_ids: list[bytes], timeout: float, pw: Any
) -> Steps:
    """Per id, ``True`` only if this call recorded it (a repeat within the batch is
    ``False``: its first copy recorded it). One multi-row INSERT per ``BATCH_SIZE`` ids
    on our own sessions; on a host's, each id is a framed spend of its own."""
    out: list[bool] = []
    for i in range(0, len(request_ids), BATCH_SIZE):
        chunk = request_ids[i : i + BATCH_SIZE]
        if framed:
            for rid in chunk:
                out.append((yield from spend(st, True, rid, time.monotonic() + timeout, pw)))
            continue
        due = time.monotonic() + timeout
        op = Op(st.spend_many, (st.namespace, new_token(), chunk), first=True, due=due)
        try:
            row = yield op
        except Exception as exc:
            # A batch is never settled id by id: an outcome that may have landed is
            # ambiguous for the whole batch (re-running it is safe: a migration does).
            _unless_unknown("spend_many", exc, pw)
            raise errors.ambiguous(exc, None, pw) from exc
        assert row is not None
        won = set() if row[0] is None else {bytes(rid) for rid in row[0]}
        for rid in chunk:
            out.append(rid in won)
            won.discard(rid)
    return out


def spent_among(st: Statements, request_ids: list[bytes], timeout: float, pw: Any) -> Steps:
    """Per id, whether it is recorded: one guarded read per ``BATCH_SIZE`` ids."""
    out: list[bool] = []
    for i in range(0, len(request_ids), BATCH_SIZE):
        chunk = request_ids[i : i + BATCH_SIZE]
        op = Op(st.spent_among, (st.namespace, chunk), guarded=True, due=time.monotonic() + timeout)
        spent = set((yield from _listed(op, pw)))
        out += [rid in spent for rid in chunk]
    return out


def lineage(st: Statements, due: float, pw: Any) -> Steps:
    """The store_ids this store was migrated from (its lineage markers)."""
    low, high = marker_range(MarkerKind.LINEAGE)
    op = Op(st.marker_range, (st.namespace, low, high), guarded=True, due=due)
    raws: list[bytes] = yield from _listed(op, pw)
    return [marker_subject(MarkerKind.LINEAGE, raw) for raw in raws]


def doctor_settings(due: float, password: str | None) -> Steps:
    """The doctor's re-read of the server's version and defaults (reads only)."""
    try:
        row = yield Op(DOCTOR_SETTINGS, due=due)
    except Exception as exc:
        raise errors.unavailable("reading the server's settings", exc, password) from exc
    assert row is not None
    return identity.ServerSettings(str(row[0]), int(row[1]), str(row[2]), str(row[3]))


# Forks of this process so far, counted in each child (os.register_at_fork): a ledger
# compares it with the count it was built (or rebuilt) under. No system call on the
# hot path: os.getpid() is one, and costs more than the rest of the check.
forks = 0
# Rebuilding after fork happens once per ledger, under a lock that is new in every
# child (a lock inherited from the parent may have been held by a thread that the
# child does not have).
_fork_lock = threading.Lock()


def _count_fork() -> None:
    global forks, _fork_lock
    forks += 1
    _fork_lock = threading.Lock()


os.register_at_fork(after_in_child=_count_fork)


class Deadline:
    """An op's deadline armed on its connection's socket, disarmed first however the op
    ends (an error, a cancellation, KeyboardInterrupt): a deadline left armed could shut
    a socket that is no longer this op's (a descriptor is reused as soon as it is
    closed). ``expired``: it shut the socket, so the connection must be closed."""

    __slots__ = ("_ticket", "_watchdog", "expired", "timeout")

    def __init__(
        self, watchdog: Watchdog | LoopWatchdog, fileno: int, due: float, timeout: float
    ) -> None:
        self._watchdog, self.expired, self.timeout = watchdog, False, timeout
        self._ticket = watchdog.arm(fileno, due)

    def __enter__(self) -> Deadline:
        return self

    def __exit__(self, kind: object, exc: BaseException | None, tb: object) -> None:
        self.expired = self._watchdog.disarm(self._ticket)
        if self.expired and isinstance(exc, Exception):  # what the driver raised is its cause
            raise errors.DeadlineExceeded(f"no answer within {self.timeout} s") from exc


class GuardedShell:
    """Every decision the sync and async shells share, so that they only perform I/O:
    the state each op checks before it is sent, which deadline its answer gets, what
    its outcome proves, how a connection is given back, and fork. Once an op's outcome
    says the store forgot, every later op of this ledger fails closed (it never adopts
    the store's new identity: a host that read the old store_id would spend in it)."""

    _watchdog_class: type[Watchdog] | type[LoopWatchdog]
    _pool_class: Any
    _reentrant: bool = False
    _forgot: bool = False
    _pool_to_open: bool = False  # a pool built after fork opens at its first use
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
        """Not opened yet: use ``from_target`` or ``from_pool``."""
        self._pool, self._config, self._owns_pool = pool, config, owns_pool
        self._conninfo, self._password = conninfo, password
        self._st = Statements(config)
        # A pool we configured runs bare statements; a host's pool gets framed ones.
        self._framed, self._closed = not owns_pool, False
        self._first_share = config.timeout * FIRST_SHARE
        self._forks = forks
        self._watchdog = self._watchdog_class(self._first_share)
        forked = options.forked_pool_kwargs  # a child's pool, like the host's
        self._make_pool = make_pool or (lambda: self._pool_class(**forked(pool, config.timeout)))

    def _ready(self, op: Op) -> float:
        """Seconds left before ``op``'s deadline, if this ledger may still run it at all;
        in a forked child, never touch what the parent's ledger held.

        The pool, its connections (their sockets are shared with the parent), its
        worker threads and the watchdog are the parent's: they are dropped, not closed
        (closing would end the parent's sessions; psycopg does not end a connection
        that is garbage collected in another process). The child builds its own."""
        if self._forks != forks:
            with _fork_lock:
                if self._forks != forks:
                    self._watchdog = self._watchdog_class(self._first_share)
                    self._pool = self._make_pool()
                    self._owns_pool = self._pool_to_open = True
                    self._forks = forks
        if self._closed:
            raise LedgerClosed(f"ledger {self._config.qualified} is closed")
        if self._forgot:
            raise errors.store_changed(self._config.qualified)
        left = op.due - time.monotonic()
        if left <= 0:
            raise errors.OutOfTime("the call's timeout has passed")
        return left

    def _on_own(self, op: Op) -> bool:
        """On a new connection of the ledger's own, not one from the pool (after a
        connection died, the pool's other idle ones may have died with it)."""
        return op.fresh and self._conninfo is not None

    def _answer_due(self, op: Op) -> float:
        """When a pooled op's answer is due: waiting for a pooled connection sends
        nothing, so it may take the whole call; a ``first`` attempt's answer is then
        awaited for a share of the timeout at most, which leaves the rest for a settle
        or a re-read on a new connection."""
        return min(op.due, time.monotonic() + self._first_share) if op.first else op.due

    def _failed(self, op: Op, exc: Exception) -> None:
        """Fail the ledger for good if a spend's INSERT got a NULL token (no genesis row
        to take it from); otherwise the caller raises ``exc`` as it is."""
        if errors.is_guard_failure(exc):
            self._forgot = True
            raise errors.store_changed(self._config.qualified) from exc

    def _answered(self, op: Op, row: Row) -> Row:
        """``row``, unless a guarded op got none: then the store forgot, for good."""
        if op.guarded and row is None:
            self._forgot = True
            raise errors.store_changed(self._config.qualified)
        return row

    def _taken(self, conn: Any, due: float) -> Deadline:
        """Refuse a standby (PostgreSQL 14+ reports ``in_hot_standby`` on every
        connection, for free), then arm the op's deadline on ``conn``."""
        if conn.pgconn.parameter_status(b"in_hot_standby") == b"on":
            raise errors.standby_error(f"ledger {self._config.qualified}")
        return Deadline(self._watchdog, conn.fileno(), due, self._config.timeout)

    @staticmethod
    def _as_found(conn: Any, autocommit: bool) -> tuple[bool, bool]:
        """What gives a connection back as it came (no open transaction, the host's
        autocommit back): whether to roll back, and whether to reset autocommit."""
        if conn.closed:
            return False, False
        idle = conn.pgconn.transaction_status == TransactionStatus.IDLE
        return not idle, conn.autocommit != autocommit

    def _closing(self) -> bool:
        """Mark this ledger closed; ``True`` if it may release what it holds (not in a
        forked child that has not rebuilt yet: everything there is the parent's)."""
        self._closed = True
        if self._forks != forks:
            return False
        self._watchdog.stop()
        return True

    def _opened(self, opened: Opened) -> None:
        self._doctor_opened = opened
        self._info = opened.info
        self._reentrant = opened.reentrant
        self._st = self._st.guarded(opened.guard, opened.reentrant)

    # The decisions of this ledger's calls, bound to its statements and settings.

    def _due(self) -> float:
        return time.monotonic() + self._config.timeout

    def _spend_steps(self, request_id: bytes) -> Steps:
        return spend(self._st, self._framed, request_id, self._due(), self._password)

    def _spend_as_steps(self, request_id: bytes, digest: bytes) -> Steps:
        st, due = self._st, self._due()
        return spend_as(st, self._framed, self._reentrant, request_id, digest, due, self._password)

    def _is_spent_steps(self, request_id: bytes) -> Steps:
        return is_spent(self._st, self._framed, request_id, self._due(), self._password)

    def _spend_many_steps(self, request_ids: Sequence[str]) -> Steps:
        raws = [validate_request_id(r) for r in request_ids]
        return spend_many(self._st, self._framed, raws, self._config.timeout, self._password)

    def _spent_among_steps(self, request_ids: Sequence[str]) -> Steps:
        raws = [validate_request_id(r) for r in request_ids]
        return spent_among(self._st, raws, self._config.timeout, self._password)

    def _lineage_steps(self) -> Steps:
        return lineage(self._st, self._due(), self._password)

    def _page_steps(self, what: str, after: bytes) -> Steps:
        page = id_page if what == "ids" else namespace_page
        return page(self._st, after, self._due(), self._password)
