"""What open, spend and is_spent do, written once without I/O.

Each flow is a generator that yields an :class:`Op` (statements to run on one
connection) and receives the row it asked for, or has the driver's exception thrown
into it. The sync and async shells only run ops, so every decision (retry, re-read,
error mapping) is made here, identically for both (C9).
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

from psycopg import sql

from ledger_core.errors import LedgerError
from ledger_core.protocol import LedgerInfo
from ledger_core.tokens import attempt_outcome

from . import rules
from .rules import Failure, PgConfig, Statements

Row = tuple[Any, ...] | None
Query = sql.SQL | sql.Composed


@dataclass(frozen=True)
class Call:
    query: Query
    params: tuple[Any, ...] | None = None
    fetch: bool = False


@dataclass(frozen=True)
class Op:
    """Statements for one connection, sent as one pipeline (one round trip).

    ``fresh``: on a new connection of the ledger's own, not one from the pool (after a
    connection died, the pool's other idle ones may be dead too). The op's result is
    the first row of the last call with ``fetch``.
    """

    calls: tuple[Call, ...]
    fresh: bool = False


Flow = Generator[Op, Row, Any]


def _framed(st: Statements, call: Call) -> tuple[Call, ...]:
    """``call`` in its own READ COMMITTED transaction with a durable commit."""
    return (Call(rules.BEGIN), Call(st.frame_settings), call, Call(rules.COMMIT))


def spend_op(st: Statements, framed: bool, params: tuple[bytes, bytes, bytes]) -> Op:
    call = Call(st.spend, params, fetch=True)
    return Op(_framed(st, call) if framed else (call,))


def spend_flow(
    st: Statements, framed: bool, key: tuple[bytes, bytes], token: bytes, password: str | None
) -> Flow:
    """One INSERT; after an unknown outcome, settle it with the same token (C5).

    The settling op inserts again with the same token, then reads the token: if the
    first write is still in flight, the INSERT waits on its unique-key lock, so the read
    that follows sees its final outcome, and a first write that never landed is made by
    the retry. Our token means this call recorded the id, another token means it did not.
    """
    params = (*key, token)
    try:
        row = yield spend_op(st, framed, params)
    except LedgerError:
        raise
    except Exception as exc:
        first = exc
    else:
        return row is not None
    if rules.classify(first) is not Failure.UNKNOWN:
        raise rules.unavailable("spend", first, password) from first
    settle = (*_framed(st, Call(st.spend, params)), Call(st.read_token, key, fetch=True))
    try:
        row = yield Op(settle, fresh=True)
    except Exception as exc:
        raise rules.ambiguous(first, exc, password) from first
    outcome = attempt_outcome(None if row is None else bytes(row[0]), token)
    if outcome is None:  # the settling INSERT would have recorded ours: nothing is proven
        raise rules.ambiguous(first, None, password) from first
    return outcome


def is_spent_flow(st: Statements, key: tuple[bytes, bytes], password: str | None) -> Flow:
    """One indexed read; after a lost connection, read once more on a new one."""
    op = Op((Call(st.is_spent, key, fetch=True),))
    try:
        row = yield op
    except LedgerError:
        raise
    except Exception as exc:
        if rules.classify(exc) is not Failure.UNKNOWN:
            raise rules.unavailable("is_spent", exc, password) from exc
    else:
        return row is not None
    try:
        row = yield Op(op.calls, fresh=True)
    except LedgerError:
        raise
    except Exception as exc:
        raise rules.unavailable("is_spent", exc, password) from exc
    return row is not None


def ddl_op(st: Statements) -> Op:
    """Idempotent DDL under an advisory lock, so concurrent setups never race the catalog."""
    calls = [Call(rules.BEGIN), Call(rules.ADVISORY_LOCK, (rules.advisory_key(st),))]
    if st.config.schema != rules.DEFAULT_SCHEMA:
        calls.append(Call(st.create_schema))
    calls += [Call(st.create_table), Call(rules.COMMIT)]
    return Op(tuple(calls))


def open_flow(st: Statements, location: str, password: str | None, *, setup: bool = False) -> Flow:
    """Check the server and the table, create the table if allowed, derive ``store_id``."""
    config: PgConfig = st.config
    try:
        probe_op = Op((Call(rules.PROBE, (st.regclass_text,), fetch=True),))
        row = yield probe_op
        assert row is not None
        probe = rules.probe_from_row(row)
        rules.refuse_standby(probe, config)
        if probe.table_oid is None or setup:
            if not (config.create or setup):
                raise rules.missing_table(config)
            yield ddl_op(st)
            row = yield probe_op
            assert row is not None
            probe = rules.probe_from_row(row)
        system_identifier = identity_row = None
        if probe.may_read_control:
            row = yield Op((Call(rules.SYSTEM_IDENTIFIER, fetch=True),))
            assert row is not None
            system_identifier = str(row[0])
        else:
            ident = (rules.IDENTITY_NAMESPACE, rules.IDENTITY_ID)
            row = yield Op(
                (
                    Call(st.create_identity, (*ident, rules.new_identity_token())),
                    Call(st.read_token, ident, fetch=True),
                )
            )
            assert row is not None
            identity_row = bytes(row[0])
    except LedgerError:
        raise
    except Exception as exc:
        raise rules.unavailable(f"opening ledger {config.qualified}", exc, password) from exc
    info: LedgerInfo = rules.ledger_info(
        probe,
        config,
        location,
        system_identifier=system_identifier,
        identity_row=identity_row,
    )
    return info
