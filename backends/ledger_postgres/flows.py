"""What open, spend and is_spent do, written once without I/O.

A spend or a read is one :class:`Op` (one message, one round trip). When it raises,
or to open a ledger, a flow takes over: a generator that yields ops and receives the
row each asked for, or has the driver's exception thrown into it. The sync and async
shells only run ops, so every decision (retry, re-read, error mapping) is made here,
identically for both (C9).
"""

from __future__ import annotations

import os
import time
from collections.abc import Generator
from typing import Any, NamedTuple

from psycopg import sql

from ledger_core.errors import LedgerClosed, LedgerError
from ledger_core.ids import MarkerKind, marker_range, marker_subject
from ledger_core.tokens import attempt_outcome

from . import rules
from .rules import Failure, PgConfig, Statements

Row = tuple[Any, ...] | None
Query = sql.SQL | sql.Composed | bytes


class Op(NamedTuple):
    """One message to the server (one round trip) and which answer to read.

    ``result``: the index of the result set whose first row is the op's answer (a
    script answers with one result set per statement), or ``None`` for no answer.
    ``fresh``: on a new connection of the ledger's own, not one from the pool (after a
    connection died, the pool's other idle ones may have died with it).
    ``counted``: the answer is the statement's row count instead: ``()`` (a row) if it
    touched a row, else ``None``; cheaper than a ``RETURNING`` row to decode.
    ``guarded``: the answer row comes from the genesis row; no row means the store
    forgot (the shell then fails closed, for good).
    """

    query: Query
    params: tuple[Any, ...] | None = None
    result: int | None = 0
    fresh: bool = False
    counted: bool = False
    guarded: bool = False


Flow = Generator[Op, Row, Any]


def spend_op(st: Statements, framed: bool, request_id: bytes, token: bytes) -> Op:
    """The one INSERT of a spend; a row back means this call recorded the id."""
    if framed:
        return Op(st.spend_framed(request_id, token), result=st.FRAMED_RESULT)
    return Op(st.spend, (st.namespace, request_id, token), counted=True)


def spend_failed(
    st: Statements, request_id: bytes, token: bytes, first: Exception, password: str | None
) -> Flow:
    """After the INSERT raised: settle an unknown outcome with the same token (C5).

    Settling inserts again with the same token and reads whose token is stored: ours
    means this call recorded the id (in the first write or in this one), another
    token means another call did. Only if settling fails too is the spend ambiguous.
    """
    if isinstance(first, LedgerError):
        raise first
    if rules.classify(first) is not Failure.UNKNOWN:
        raise rules.unavailable("spend", first, password) from first
    try:
        row = yield Op(st.settle(request_id, token), result=st.SETTLE_RESULT, fresh=True)
    except rules.StoreChanged:
        raise
    except Exception as exc:
        raise rules.ambiguous(first, exc, password) from first
    outcome = attempt_outcome(None if row is None else bytes(row[0]), token)
    if outcome is None:  # the settling INSERT would have stored ours: nothing is proven
        raise rules.ambiguous(first, None, password) from first
    return outcome


def is_spent_op(st: Statements, framed: bool, request_id: bytes) -> Op:
    """One indexed read, from the genesis row: its one column says whether the id is
    recorded (no row: the store forgot)."""
    if framed:
        return Op(st.is_spent_framed(request_id), result=st.FRAMED_RESULT, guarded=True)
    return Op(st.is_spent, (st.namespace, request_id), guarded=True)


def is_spent_answer(row: Row) -> bool:
    """The read's answer; the shell has already failed a guarded op without a row."""
    assert row is not None
    return bool(row[0])


def is_spent_failed(op: Op, first: Exception, password: str | None) -> Flow:
    """After the read raised: on a lost connection, read once more on a new one."""
    if isinstance(first, LedgerError):
        raise first
    if rules.classify(first) is not Failure.UNKNOWN:
        raise rules.unavailable("is_spent", first, password) from first
    try:
        row = yield op._replace(fresh=True)
    except LedgerError:
        raise
    except Exception as exc:
        raise rules.unavailable("is_spent", exc, password) from exc
    return is_spent_answer(row)


def open_flow(st: Statements, location: str, password: str | None, *, setup: bool = False) -> Flow:
    """Check the server and the table, create the table if allowed, read (or write,
    first opener wins) the genesis row, derive ``store_id`` and the guard."""
    config: PgConfig = st.config
    try:
        probe_op = Op(rules.PROBE, (st.regclass_text, st.regclass_text))
        row = yield probe_op
        assert row is not None
        probe = rules.probe_from_row(row)
        rules.refuse_standby(probe, config)
        if probe.table_oid is None or setup:
            if not (config.create or setup):
                raise rules.missing_table(config)
            yield Op(st.ddl(), result=None)
            row = yield probe_op
            assert row is not None
            probe = rules.probe_from_row(row)
        system_identifier = None
        if probe.may_read_control:
            row = yield Op(rules.SYSTEM_IDENTIFIER)
            assert row is not None
            system_identifier = str(row[0])
        # Read first: a role that may only SELECT can open a table that has its genesis.
        row = yield Op(st.read_genesis)
        if row is None:
            row = yield Op(st.genesis_row(rules.new_identity_token()), result=st.IDENTITY_RESULT)
            assert row is not None
        genesis = bytes(row[0])
    except LedgerError:
        raise
    except Exception as exc:
        raise rules.unavailable(f"opening ledger {config.qualified}", exc, password) from exc
    opened: rules.Opened = rules.ledger_info(
        probe, config, location, system_identifier=system_identifier, genesis=genesis
    )
    return opened


def page_op(st: Statements, after: bytes) -> Op:
    """The next page of spent ids after ``after`` (``b""`` for the first: ids are never
    empty), in byte order: keyset paging, so memory stays flat for any table size."""
    return Op(st.page, (st.namespace, after, rules.PAGE_SIZE), guarded=True)


def page_ids(row: Row) -> list[bytes]:
    """The ids a page op answered; a page shorter than ``PAGE_SIZE`` is the last."""
    assert row is not None  # guarded: the shell has failed an op without a row
    return [] if row[0] is None else [bytes(rid) for rid in row[0]]


def spend_many_op(st: Statements, request_ids: list[bytes], token: bytes) -> Op:
    """One multi-row INSERT (placeholders in text order: namespace, token, ids)."""
    return Op(st.spend_many, (st.namespace, token, request_ids))


def spend_many_answer(request_ids: list[bytes], row: Row) -> list[bool]:
    """Per id: ``True`` only if this statement recorded it (a repeat within the batch
    is ``False``: its first copy recorded it)."""
    assert row is not None
    won = set() if row[0] is None else {bytes(rid) for rid in row[0]}
    out = []
    for rid in request_ids:
        out.append(rid in won)
        won.discard(rid)
    return out


def spend_many_failed(exc: Exception, password: str | None) -> LedgerError:
    """A batch is never settled id by id: an outcome that may have landed is ambiguous
    for the whole batch (re-running it is safe: a migration does)."""
    if isinstance(exc, LedgerError):
        return exc
    if rules.classify(exc) is not Failure.UNKNOWN:
        return rules.unavailable("spend_many", exc, password)
    return rules.ambiguous(exc, None, password)


def spent_among_op(st: Statements, request_ids: list[bytes]) -> Op:
    return Op(st.spent_among, (st.namespace, request_ids), guarded=True)


def spent_among_answer(request_ids: list[bytes], row: Row) -> list[bool]:
    assert row is not None  # guarded: the shell has failed an op without a row
    spent = set() if row[0] is None else {bytes(rid) for rid in row[0]}
    return [rid in spent for rid in request_ids]


def lineage_op(st: Statements) -> Op:
    low, high = marker_range(MarkerKind.LINEAGE)
    return Op(st.marker_range, (st.namespace, low, high), guarded=True)


def lineage_answer(row: Row) -> list[str]:
    assert row is not None  # guarded: the shell has failed an op without a row
    raws = [] if row[0] is None else [bytes(raw) for raw in row[0]]
    return [marker_subject(MarkerKind.LINEAGE, raw) for raw in raws]


def listing_failed(exc: Exception, password: str | None) -> LedgerError:
    return exc if isinstance(exc, LedgerError) else rules.unavailable("spent_ids", exc, password)


# Forks of this process so far, counted in each child (os.register_at_fork): a ledger
# compares it with the count it was built (or rebuilt) under. No system call on the
# hot path: os.getpid() is one, and costs more than the rest of the check.
forks = 0


def _count_fork() -> None:
    global forks
    forks += 1


os.register_at_fork(after_in_child=_count_fork)


class GuardedShell:
    """What the sync and async shells share about a store that forgot: once an op's
    outcome says so, every later op of this ledger fails closed (it never adopts the
    store's new identity: a host that read the old store_id would spend in it)."""

    _config: PgConfig
    _closed: bool
    _forgot: bool = False

    def _time_left(self, due: float) -> float:
        """Seconds left before ``due``, if this ledger may still run an op at all."""
        if self._closed:
            raise LedgerClosed(f"ledger {self._config.qualified} is closed")
        if self._forgot:
            raise rules.store_changed(self._config)
        left = due - time.monotonic()
        if left <= 0:
            raise rules.OutOfTime("the call's timeout has passed")
        return left

    def _check_outcome(self, op: Op, row: Row, exc: BaseException | None) -> None:
        """Fail the ledger for good if the guard failed: a guarded op got no row, or a
        spend's INSERT got a NULL token (no genesis row to take it from)."""
        if rules.is_guard_failure(exc) if exc is not None else op.guarded and row is None:
            self._forgot = True
            raise rules.store_changed(self._config) from exc
