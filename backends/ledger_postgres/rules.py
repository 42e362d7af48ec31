"""The PostgreSQL ledger's rules, once: config, SQL, error mapping, identity, safety.

Nothing here does I/O. The sync and async ledgers send the statements built here and
hand back what comes of them (rows or driver exceptions), so both variants decide
everything the same way (C9).
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import uuid
from dataclasses import dataclass
from enum import Enum
from typing import Any

from psycopg import Error as PgError
from psycopg import errors as pg_errors
from psycopg import sql
from psycopg_pool import PoolTimeout

from ledger_core.errors import (
    AmbiguousSpend,
    InvalidLedgerURL,
    LedgerError,
    LedgerUnavailable,
    UnsafeStoreConfig,
)
from ledger_core.ids import DEFAULT_NAMESPACE, validate_namespace
from ledger_core.protocol import LedgerInfo

DEFAULT_SCHEMA = "public"
DEFAULT_TABLE = "decision_ledger"
DEFAULT_TIMEOUT = 5.0
SERVER_SHARE = 0.8  # of the timeout, for the server's statement and lock timeouts

# The fallback identity row lives in the ledger's own table under a namespace that is
# not valid UTF-8, so it can never be a ledger namespace (C7).
IDENTITY_NAMESPACE = b"\xff"
IDENTITY_ID = b"store-identity"

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")


def check_identifier(kind: str, name: object) -> str:
    """A schema or table name must be a plain identifier; it is still always quoted."""
    if not isinstance(name, str) or not _IDENTIFIER.fullmatch(name):
        raise InvalidLedgerURL(
            f"{kind} name {name!r} is not a plain identifier "
            "(ASCII letters, digits and _, not starting with a digit, at most 63 bytes)"
        )
    return name


@dataclass(frozen=True)
class PgConfig:
    """What a ledger needs besides its connections, validated once."""

    namespace: str = DEFAULT_NAMESPACE
    schema: str = DEFAULT_SCHEMA
    table: str = DEFAULT_TABLE
    create: bool = True
    timeout: float = DEFAULT_TIMEOUT

    def __post_init__(self) -> None:
        validate_namespace(self.namespace)
        check_identifier("schema", self.schema)
        check_identifier("table", self.table)
        if not 0 < self.timeout <= 3600:
            raise InvalidLedgerURL("option 'timeout' must be more than 0 and at most 3600 s")

    @property
    def namespace_bytes(self) -> bytes:
        return self.namespace.encode("utf-8")

    @property
    def qualified(self) -> str:
        """``schema.table`` for messages (plain identifiers: nothing to hide or escape)."""
        return f"{self.schema}.{self.table}"


def scrub(text: str, password: str | None) -> str:
    """A driver message with any echo of the password removed."""
    return text.replace(password, "***") if password else text


# -- SQL ---------------------------------------------------------------------------


def _literal_ms(seconds: float) -> sql.Literal:
    return sql.Literal(str(max(1, int(seconds * 1000))))


_SPEND = (
    "INSERT INTO {table} (namespace, request_id, token) VALUES ({ns}, {rid}, {token}) "
    "ON CONFLICT (namespace, request_id) DO NOTHING"
)
# Inside a framed script an answer is a row of one statement's result set; alone, the
# statement's row count answers (no row to describe, send and decode).
_RETURNING = " RETURNING true"
_READ_TOKEN = "SELECT token FROM {table} WHERE namespace = {ns} AND request_id = {rid}"
_IS_SPENT = "SELECT true FROM {table} WHERE namespace = {ns} AND request_id = {rid}"
# A page of spent ids after a given one, in byte order, as one array (one row back).
_PAGE = (
    "SELECT array_agg(request_id ORDER BY request_id) FROM (SELECT request_id FROM {table} "
    "WHERE namespace = {ns} AND request_id > {rid} ORDER BY request_id LIMIT {token}) AS page"
)
PAGE_SIZE = 1000
# bytea compares bytes: no collation, no case folding, and NUL is data (C8).
_CREATE_TABLE = (
    "CREATE TABLE IF NOT EXISTS {table} ("
    "namespace bytea NOT NULL, "
    "request_id bytea NOT NULL, "
    "token bytea NOT NULL, "
    "spent_at timestamptz NOT NULL DEFAULT statement_timestamp(), "
    "PRIMARY KEY (namespace, request_id))"
)
_BEGIN = sql.SQL("BEGIN ISOLATION LEVEL READ COMMITTED READ WRITE")
_COMMIT = sql.SQL("COMMIT")
_P = sql.Placeholder()


def _script(*statements: sql.Composable) -> sql.Composed:
    """Statements sent as one simple-protocol message: one round trip, in order."""
    return sql.SQL("; ").join(statements)


def bytea_literal(value: bytes) -> bytes:
    """``E'\\x<hex>'::bytea``: hex digits only, so no value can end the literal, and
    read the same whatever ``standard_conforming_strings`` says."""
    return b"E'\\\\x" + value.hex().encode("ascii") + b"'::bytea"


class Statements:
    """The ledger's statements for one table, rendered once with quoted identifiers.

    Each statement has two forms from one template: with server-side parameters (one
    statement on a session we set up), and with values bound as hex bytea literals
    inside a framed script (a session the host owns). Either way a value is data.
    Templates are rendered to bytes once: composing SQL on every call costs more than
    the rest of a call's client-side work.
    """

    def __init__(self, config: PgConfig) -> None:
        self.config = config
        self.table = sql.Identifier(config.schema, config.table)
        # The server gives up first (a clean error: nothing recorded); the client's own
        # deadline, the full timeout, is for a server that can no longer answer at all.
        ms = _literal_ms(config.timeout * SERVER_SHARE)
        # Our own pool sets each session up once; a spend is then one autocommit INSERT:
        # its own transaction, at READ COMMITTED, with a durable commit.
        self.session_setup = sql.SQL(
            "SET synchronous_commit = on; "
            "SET default_transaction_isolation = 'read committed'; "
            "SET default_transaction_read_only = off; "
            "SET statement_timeout = {ms}; SET lock_timeout = {ms}; "
            "SET idle_in_transaction_session_timeout = {ms}"
        ).format(ms=ms)
        # A session the host owns is left as it is: each statement is framed in its own
        # transaction with these transaction-local settings instead.
        settings = sql.SQL(
            "SELECT set_config('synchronous_commit', 'on', true), "
            "set_config('statement_timeout', {ms}, true), "
            "set_config('lock_timeout', {ms}, true)"
        ).format(ms=ms)
        self._settings = settings
        spend, is_spent = self._bind(_SPEND, 3), self._bind(_IS_SPENT, 2)
        read_token = self._bind(_READ_TOKEN, 2)
        self.spend = self._render(spend)  # answers with its row count: 1 if it recorded
        self.is_spent = self._render(is_spent)
        self.page = self._render(self._bind(_PAGE, 3))
        self._spend_framed = self._render(self.framed(self._bind(_SPEND + _RETURNING, 3)))
        self._is_spent_framed = self._render(self.framed(is_spent))
        # Read inside the transaction: at READ COMMITTED the SELECT takes a new snapshot
        # after the INSERT has waited out any writer of the same key; the answer only
        # counts if the COMMIT after it succeeds too (the script raises otherwise).
        self._settle = self._render(_script(_BEGIN, self._settings, spend, read_token, _COMMIT))
        self.namespace = config.namespace_bytes
        self._ns = bytea_literal(self.namespace)
        # The text to_regclass() resolves: the quoted, qualified name.
        self.regclass_text = f'"{config.schema}"."{config.table}"'
        lock = uuid.uuid5(uuid.NAMESPACE_URL, f"decision-ledger:{config.qualified}").int >> 64
        self.ddl_lock_key = lock - (1 << 64) if lock >= 1 << 63 else lock

    def _bind(self, template: str, values: int) -> sql.Composed:
        names = ("ns", "rid", "token")[:values]
        return sql.SQL(template).format(table=self.table, **{name: _P for name in names})

    @staticmethod
    def _render(statement: sql.Composable) -> bytes:
        # Identifiers are plain (validated) names: no connection is needed to quote them.
        return statement.as_bytes(None)

    def framed(self, statement: sql.Composable) -> sql.Composed:
        """``statement`` in its own READ COMMITTED transaction with a durable commit."""
        return _script(_BEGIN, self._settings, statement, _COMMIT)

    # Framed scripts answer with one result set per statement; these are the ones read.
    FRAMED_RESULT = 2
    SETTLE_RESULT = 3
    IDENTITY_RESULT = SETTLE_RESULT

    def spend_framed(self, request_id: bytes, token: bytes) -> bytes:
        return self._spend_framed % (self._ns, bytea_literal(request_id), bytea_literal(token))

    def is_spent_framed(self, request_id: bytes) -> bytes:
        return self._is_spent_framed % (self._ns, bytea_literal(request_id))

    def settle(self, request_id: bytes, token: bytes) -> bytes:
        """Insert again with the same token, then read whose token is stored (C5).

        If the first write is still in flight, the INSERT waits on its unique-key lock,
        so the read that follows sees the final outcome.
        """
        rid = bytea_literal(request_id)
        return self._settle % (self._ns, rid, bytea_literal(token), self._ns, rid)

    def ddl(self) -> sql.Composed:
        """Idempotent DDL under an advisory lock, so concurrent setups never race the
        catalog (two ``CREATE TABLE IF NOT EXISTS`` at once can fail on pg_type)."""
        statements: list[sql.Composable] = [
            _BEGIN,
            self._settings,
            sql.SQL("SELECT pg_advisory_xact_lock({})").format(sql.Literal(self.ddl_lock_key)),
        ]
        if self.config.schema != DEFAULT_SCHEMA:
            statements.append(
                sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(self.config.schema))
            )
        statements += [sql.SQL(_CREATE_TABLE).format(table=self.table), _COMMIT]
        return _script(*statements)

    def identity_row(self, token: bytes) -> bytes:
        """Create the fallback identity row (the first opener wins; a durable commit,
        or a crash could change the store's identity), then read it."""
        ns, rid = bytea_literal(IDENTITY_NAMESPACE), bytea_literal(IDENTITY_ID)
        return self._settle % (ns, rid, bytea_literal(token), ns, rid)


PROBE = sql.SQL(
    "SELECT current_setting('fsync'), pg_is_in_recovery(), "
    "(SELECT oid FROM pg_database WHERE datname = current_database()), "
    "to_regclass(%s)::oid, "
    "has_function_privilege('pg_catalog.pg_control_system()', 'EXECUTE')"
)
SYSTEM_IDENTIFIER = sql.SQL("SELECT system_identifier::text FROM pg_catalog.pg_control_system()")


# -- identity and safety (C2, C6) --------------------------------------------------


@dataclass(frozen=True)
class Probe:
    """The facts read at open that decide whether and how this ledger proves."""

    fsync: str
    in_recovery: bool
    database_oid: int
    table_oid: int | None
    may_read_control: bool


def probe_from_row(row: tuple[Any, ...]) -> Probe:
    return Probe(
        fsync=str(row[0]),
        in_recovery=bool(row[1]),
        database_oid=int(row[2]),
        table_oid=None if row[3] is None else int(row[3]),
        may_read_control=bool(row[4]),
    )


def refuse_standby(probe: Probe, config: PgConfig) -> None:
    if probe.in_recovery:
        raise standby_error(f"opening ledger {config.qualified}")


def standby_error(what: str) -> UnsafeStoreConfig:
    return UnsafeStoreConfig(
        f"{what} refused: the server is a read-only standby (pg_is_in_recovery()); a ledger "
        "spends and reads on the primary only: add target_session_attrs=read-write to the URL"
    )


def in_hot_standby(parameter: bytes | None) -> bool:
    """PostgreSQL 14+ reports ``in_hot_standby`` on every connection, for free."""
    return parameter == b"on"


def missing_table(config: PgConfig) -> LedgerUnavailable:
    return LedgerUnavailable(
        f"ledger table {config.qualified} does not exist and create=false: run "
        "`decision-ledger setup URL` (or ledger_postgres.setup) as a role that may create it"
    )


def ledger_info(
    probe: Probe,
    config: PgConfig,
    location: str,
    *,
    system_identifier: str | None,
    identity_row: bytes | None,
) -> LedgerInfo:
    """The store identity (C6): the cluster, the database and the table, plus namespace.

    ``system_identifier`` is fixed by initdb, so another cluster (a dump restored
    elsewhere) differs; the table's OID changes when it is dropped and re-created. The
    fields before the namespace have fixed forms, so the namespace cannot collide.
    """
    if probe.table_oid is None:
        raise LedgerUnavailable(f"ledger table {config.qualified} is missing")
    where = f"{probe.database_oid}:{probe.table_oid}:{config.namespace}"
    if system_identifier is not None:
        store_id: str | None = f"postgres:{int(system_identifier)}:{where}"
        identity = "pg_control_system().system_identifier, the database OID and the table OID"
    elif identity_row is not None:
        store_id = f"postgres-row:{uuid.UUID(bytes=identity_row)}:{where}"
        identity = (
            "fallback: this role may not read pg_control_system(), so an identity row created "
            "in the ledger table, the database OID and the table OID (a dump restored into "
            "another cluster could carry the row and meet an equal OID)"
        )
    else:
        raise LedgerError("no store identity could be read")
    reason = None
    if probe.fsync.lower() != "on":
        store_id = None
        reason = (
            "fsync is off on this server: a crash can lose recorded ids (C2), "
            "so this ledger never proves"
        )
    return LedgerInfo(
        backend="postgres",
        store_id=store_id,
        reason=reason,
        location=location,
        namespace=config.namespace,
        identity=identity,
    )


# -- errors (C4, C5) ---------------------------------------------------------------


class DeadlineExceeded(Exception):
    """An operation got no answer in time; its socket was shut down (outcome unknown)."""


class Failure(Enum):
    """What a driver exception says about a statement that may have been sent."""

    NOT_SENT = "not sent"  # no connection was had: nothing reached the server
    REJECTED = "rejected"  # the server answered with an error: the transaction rolled back
    UNKNOWN = "unknown"  # lost or timed out after sending: it may have committed


# Errors that end the session may arrive after a commit (e.g. a shutdown while waiting
# for a synchronous standby): only statement errors prove a rollback.
_SESSION_ENDING = ("08", "57P", "XX", "58")


def classify(exc: BaseException) -> Failure:
    if isinstance(exc, PoolTimeout):
        return Failure.NOT_SENT
    sqlstate = getattr(exc, "sqlstate", None)
    if isinstance(exc, PgError) and sqlstate and not sqlstate.startswith(_SESSION_ENDING):
        return Failure.REJECTED
    return Failure.UNKNOWN


def _detail(exc: BaseException, password: str | None) -> str:
    return scrub(str(exc).strip() or type(exc).__name__, password)


def unavailable(what: str, exc: BaseException, password: str | None) -> LedgerError:
    """The one mapping of a failure that proves nothing was recorded."""
    if isinstance(exc, pg_errors.ReadOnlySqlTransaction):
        return UnsafeStoreConfig(
            f"{what} refused: the server is read-only (a standby, or "
            f"default_transaction_read_only): {_detail(exc, password)}"
        )
    return LedgerUnavailable(f"{what} failed: {_detail(exc, password)}")


def ambiguous(first: BaseException, second: BaseException | None, pw: str | None) -> AmbiguousSpend:
    tail = "" if second is None else f"; re-reading its token failed: {_detail(second, pw)}"
    return AmbiguousSpend(f"spend outcome unknown: {_detail(first, pw)}{tail}")


# -- deadlines ---------------------------------------------------------------------


def shutdown_socket(fileno: int) -> None:
    """End a connection's socket from outside the call blocked on it.

    The blocked wait wakes to an end of stream and the driver raises, so a black-holed
    network ends in a raise after the timeout rather than a hang. A socket already gone
    needs no shutting down.
    """
    try:
        dup = os.dup(fileno)
    except OSError:
        return
    with socket.socket(fileno=dup) as sock, contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


def new_identity_token() -> bytes:
    """The fallback identity: 16 random bytes, written once by the first opener."""
    return uuid.uuid4().bytes
