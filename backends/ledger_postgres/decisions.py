"""Every PostgreSQL decision as step generators yielding :class:`~.commands.Op`s, which
the sync and async shells run (C9); each op carries its call's one deadline (``due``).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Generator, Sequence
from typing import Any

from psycopg.pq import TransactionStatus

from ledger_core import notices
from ledger_core.errors import LedgerClosed, LedgerError, missing_namespace
from ledger_core.forks import PerProcess
from ledger_core.guard import Guard
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
    """Check server and table, create or upgrade the table if allowed, read (or write,
    first opener wins) the genesis row, and derive ``store_id`` and the guard."""
    config: PgConfig = st.config
    qualified = config.qualified
    try:
        probe_op = Op(PROBE, (st.regclass_text,) * 3, due=due)
        probe = identity.probe_from_row((yield from _row(probe_op)))
        if probe.in_recovery:
            raise errors.standby_error(f"opening ledger {qualified}")
        if probe.table_oid is None or setup or (config.create and not probe.has_attempt_column):
            if not (config.create or setup):
                raise errors.missing_table(config.qualified)
            yield Op(st.ddl(), result=None, due=due)
            probe = identity.probe_from_row((yield from _row(probe_op)))
        topology = replication.topology_from_row((yield from _row(Op(st.topology, due=due))))
        probe = dataclasses.replace(probe, topology=topology)
        system_identifier = None
        if probe.may_read_control:
            system_identifier = str((yield from _row(Op(SYSTEM_IDENTIFIER, due=due)))[0])
        # Read first: a role that may only SELECT opens a namespace that has its genesis.
        row = yield from _row(Op(st.read_genesis, due=due))
        if row[0] is None:
            upgrade = row[2] is not None and bool(row[3])
            if not (config.create or setup):
                if upgrade:
                    raise errors.missing_genesis(
                        qualified, config.namespace, "made by an older version"
                    )
                raise missing_namespace(config.namespace, f"in ledger table {qualified}")
            token = new_identity_token()
            write, answer = st.genesis_row(token, upgrade)
            try:
                row = yield from _row(Op(write, result=answer, due=due))
            except Exception as exc:
                if errors.classify(exc) is not errors.Failure.REJECTED:
                    raise
                why = errors.detail(exc, password)
                raise errors.missing_genesis(qualified, config.namespace, why) from exc
            if bytes(row[0]) == token:  # ours, not a racing opener's (nor an upgrade's)
                notices.created(location, config.namespace)
        genesis, xmin = bytes(row[0]), int(row[1])
    except LedgerError:
        raise
    except Exception as exc:
        raise errors.unavailable(f"opening ledger {config.qualified}", exc, password) from exc
    opened: Opened = identity.ledger_info(
        probe, config, location, system_identifier=system_identifier, genesis=genesis, xmin=xmin
    )
    return opened


def _row(op: Op) -> Steps:
    row = yield op
    assert row is not None  # each of open's queries answers one row
    return row


def _unless_unknown(what: str, exc: Exception, pw: Any) -> None:
    """Raise what ``exc`` proves; return only when the outcome is unknown."""
    if isinstance(exc, LedgerError):
        raise exc
    if errors.classify(exc) is not Failure.UNKNOWN:
        raise errors.unavailable(what, exc, pw) from exc


def _settled(row: Row, token: bytes, digest: bytes | None) -> bool | None:
    """``True`` ours (or the same key's), ``False`` another's, ``None`` nobody's."""
    if row is None:
        return None
    outcome = attempt_outcome(None if row[0] is None else bytes(row[0]), token)
    if outcome is False and digest is not None:
        return row[1] is not None and bytes(row[1]) == digest
    return outcome


def _after_unknown(
    first: Exception, settle: Op, token: bytes, digest: bytes | None, pw: Any
) -> Steps:
    """Settle an unknown outcome (C5): the same write again on a new connection, then
    whose token is stored; only if that fails too is the spend ambiguous."""
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
    """Sent once more only if the session lost its prepared statement (``DISCARD
    ALL``): such an ``EXECUTE`` fails before anything runs, so nothing is written twice."""
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
    if not reentrant:
        raise errors.missing_attempt_column(st.config.qualified)
    return (yield from spend(st, framed, request_id, due, pw, digest))


def is_spent(st: Statements, framed: bool, request_id: bytes, due: float, pw: Any) -> Steps:
    """One indexed read from the genesis row; after a lost connection, once more."""
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
    try:
        row = yield op
    except LedgerError:
        raise
    except Exception as exc:
        raise errors.unavailable("listing", exc, pw) from exc
    assert row is not None  # guarded: the shell has failed an op without a row
    return [] if row[0] is None else [bytes(value) for value in row[0]]


def page(st: Statements, ids: bool, after: bytes, due: float, pw: Any) -> Steps:
    """The spent ids (else the namespaces) after ``after``, and where the next page
    starts (``None``: done)."""
    if ids:
        op = Op(st.page, (st.namespace, after, PAGE_SIZE), guarded=True, due=due)
    else:
        op = Op(st.namespaces, (after, PAGE_SIZE), guarded=True, due=due)
    raws: list[bytes] = yield from _listed(op, pw)
    hidden = is_marker if ids else IDENTITY_NAMESPACE.__eq__
    names = [raw.decode("utf-8") for raw in raws if not hidden(raw)]
    return names, (raws[-1] if len(raws) == PAGE_SIZE else None)


def spend_many(
    st: Statements, framed: bool, request_ids: list[bytes], timeout: float, pw: Any
) -> Steps:
    """One multi-row INSERT per ``BATCH_SIZE`` ids; on a host's session, a spend each."""
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
            # Never settled id by id: ambiguous for the whole batch (safe to re-run).
            _unless_unknown("spend_many", exc, pw)
            raise errors.ambiguous(exc, None, pw) from exc
        assert row is not None
        won = set() if row[0] is None else {bytes(rid) for rid in row[0]}
        for rid in chunk:
            out.append(rid in won)
            won.discard(rid)
    return out


def spent_among(st: Statements, request_ids: list[bytes], timeout: float, pw: Any) -> Steps:
    out: list[bool] = []
    for i in range(0, len(request_ids), BATCH_SIZE):
        chunk = request_ids[i : i + BATCH_SIZE]
        op = Op(st.spent_among, (st.namespace, chunk), guarded=True, due=time.monotonic() + timeout)
        spent = set((yield from _listed(op, pw)))
        out += [rid in spent for rid in chunk]
    return out


def lineage(st: Statements, due: float, pw: Any) -> Steps:
    low, high = marker_range(MarkerKind.LINEAGE)
    op = Op(st.marker_range, (st.namespace, low, high), guarded=True, due=due)
    raws: list[bytes] = yield from _listed(op, pw)
    return [marker_subject(MarkerKind.LINEAGE, raw) for raw in raws]


def reidentify(st: Statements, due: float, pw: Any) -> Steps:
    """A fresh genesis over the one this ledger opened (C6, after a restore); no row
    back: the store changed (the shell fails the ledger)."""
    op = Op(st.reidentify(new_identity_token()), None, st.FRAMED_RESULT, guarded=True, due=due)
    try:
        yield op
    except LedgerError:
        raise
    except Exception as exc:
        raise errors.unavailable("reidentify", exc, pw) from exc


def doctor_settings(due: float, password: str | None) -> Steps:
    try:
        row = yield Op(DOCTOR_SETTINGS, due=due)
    except Exception as exc:
        raise errors.unavailable("reading the server's settings", exc, password) from exc
    assert row is not None
    return identity.ServerSettings(str(row[0]), int(row[1]), str(row[2]), str(row[3]))


class Deadline:
    """An op's deadline on its socket, disarmed however the op ends (a descriptor is
    reused once closed). ``expired``: it shut the socket; close the connection."""

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
    """Every decision the sync and async shells share, so they only perform I/O. Once
    the store forgot, every later op fails closed (never adopting a new identity)."""

    _watchdog_class: type[Watchdog] | type[LoopWatchdog]
    _pool_class: Any
    _pages: Callable[..., Any]  # ledger_core.listing's pages, or pages_async
    _drive: Callable[[Steps], Any]  # runs the steps with the shell's I/O
    _reentrant: bool = False
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
        self._pool, self._config, self._owns_pool = pool, config, owns_pool
        self._conninfo, self._password = conninfo, password
        self._st = Statements(config)
        self._framed, self._closed = not owns_pool, False
        # Failed for good (not the SQL genesis guard, ``opened.guard``); no re-check: every
        # statement proves the store.
        self._standing = Guard(float("inf"))
        self._first_share = config.timeout * FIRST_SHARE
        self._watchdog = self._watchdog_class(self._first_share)
        forked = options.forked_pool_kwargs  # a child's pool, like the host's
        self._make_pool = make_pool or (lambda: self._pool_class(**forked(pool, config.timeout)))
        self._process = PerProcess(None, self._forked)

    def _forked(self) -> None:
        """A forked child drops (never closes) the parent's pool and watchdog, builds its own."""
        self._watchdog = self._watchdog_class(self._first_share)
        self._pool = self._make_pool()
        self._owns_pool = self._pool_to_open = True

    def _ready(self, op: Op) -> float:
        """Seconds left before ``op``'s deadline, if it may run at all (in a forked
        child, on its own pool and watchdog)."""
        self._process.get()
        if self._closed:
            raise LedgerClosed(f"ledger {self._config.qualified} is closed")
        self._standing.check()
        left = op.due - time.monotonic()
        if left <= 0:
            raise errors.OutOfTime("the call's timeout has passed")
        return left

    def _answer_due(self, op: Op) -> float:
        """A ``first`` attempt's answer gets a share of the timeout, leaving the rest
        for a settle or re-read."""
        return min(op.due, time.monotonic() + self._first_share) if op.first else op.due

    def _failed(self, op: Op, exc: Exception) -> None:
        """A spend's NULL token (no genesis row) fails the ledger for good."""
        if errors.is_guard_failure(exc):
            raise self._standing.fail(errors.store_changed(self._config.qualified)) from exc

    def _answered(self, op: Op, row: Row) -> Row:
        if op.guarded and row is None:
            raise self._standing.fail(errors.store_changed(self._config.qualified))
        return row

    def _taken(self, conn: Any, due: float) -> Deadline:
        """Refuse a standby (14+ reports ``in_hot_standby`` for free); arm the deadline."""
        if conn.pgconn.parameter_status(b"in_hot_standby") == b"on":
            raise errors.standby_error(f"ledger {self._config.qualified}")
        return Deadline(self._watchdog, conn.fileno(), due, self._config.timeout)

    @staticmethod
    def _as_found(conn: Any, autocommit: bool) -> tuple[bool, bool]:
        """Whether to roll back, and whether to reset autocommit, to give ``conn`` back."""
        if conn.closed:
            return False, False
        idle = conn.pgconn.transaction_status == TransactionStatus.IDLE
        return not idle, conn.autocommit != autocommit

    def _closing(self) -> bool:
        """``True`` if it may release what it holds (not in a child yet to rebuild)."""
        self._closed = True
        if self._process.inherited():
            return False
        self._watchdog.stop()
        return True

    def _opened(self, opened: Opened) -> None:
        self._doctor_opened = opened
        self._info = opened.info
        self._reentrant = opened.reentrant
        self._st = self._st.guarded(opened.guard, opened.reentrant)

    def _due(self) -> float:
        return time.monotonic() + self._config.timeout

    # Both shells' own: the sync _drive returns the answer, the async one a coroutine.
    def _spend(self, request_id: bytes) -> Any:
        return self._drive(spend(self._st, self._framed, request_id, self._due(), self._password))

    def _spend_as(self, request_id: bytes, digest: bytes) -> Any:
        st, due = self._st, self._due()
        steps = spend_as(st, self._framed, self._reentrant, request_id, digest, due, self._password)
        return self._drive(steps)

    def _is_spent(self, request_id: bytes) -> Any:
        st, due = self._st, self._due()
        return self._drive(is_spent(st, self._framed, request_id, due, self._password))

    def spent_ids(self) -> Any:
        """Every id spent in this namespace, in byte order, a page per round trip."""
        return self._pages(lambda after: self._page(True, after), b"")

    def namespaces(self) -> Any:
        """Every namespace of this table, own included, in byte order."""
        return self._pages(lambda after: self._page(False, after), b"")

    def _page(self, ids: bool, after: bytes) -> Any:
        return self._drive(page(self._st, ids, after, self._due(), self._password))

    def _spend_many_steps(self, request_ids: Sequence[str]) -> Steps:
        raws = [validate_request_id(r) for r in request_ids]
        return spend_many(self._st, self._framed, raws, self._config.timeout, self._password)

    def _spent_among_steps(self, request_ids: Sequence[str]) -> Steps:
        raws = [validate_request_id(r) for r in request_ids]
        return spent_among(self._st, raws, self._config.timeout, self._password)

    def _reidentify(self) -> Any:
        """Then this ledger, like every other opened before, fails closed."""
        answer = self._drive(reidentify(self._st, self._due(), self._password))
        self._standing.fail(errors.store_changed(self._config.qualified))
        return answer

    def _lineage_steps(self) -> Steps:
        return lineage(self._st, self._due(), self._password)
