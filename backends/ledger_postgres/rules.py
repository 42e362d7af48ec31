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
from typing import Any, NamedTuple
from urllib.parse import quote

from psycopg import Error as PgError
from psycopg import errors as pg_errors
from psycopg import sql
from psycopg_pool import PoolClosed, PoolTimeout, TooManyRequests

from ledger_core.errors import (
    AmbiguousSpend,
    InvalidLedgerURL,
    LedgerError,
    LedgerUnavailable,
    UnsafeStoreConfig,
)
from ledger_core.ids import DEFAULT_NAMESPACE, validate_namespace
from ledger_core.protocol import Durability, LedgerInfo

DEFAULT_SCHEMA = "public"
DEFAULT_TABLE = "decision_ledger"
DEFAULT_TIMEOUT = 5.0
# One timeout bounds a whole call, pool wait and reconnects included. A first attempt
# waits for its answer at most half of it (the server is told to give up sooner, with
# a clean error), so a settle or a re-read on a new connection still fits in the rest.
FIRST_SHARE = 0.5
SERVER_SHARE = 0.4  # of the timeout, for the server's statement and lock timeouts

# The genesis row: the store's identity, written once (random token, durable commit)
# by the first opener, in the ledger's own table under a namespace that is not valid
# UTF-8, so no ledger namespace, id or marker can reach it (C7). Its token is part of
# store_id, and every operation proves it is still there in the same statement.
IDENTITY_NAMESPACE = b"\xff"
IDENTITY_ID = b"store-identity"

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")


def check_identifier(kind: str, name: object) -> str:
    """A schema or table name must be a plain identifier; it is still always quoted.

    Schema names starting with ``pg_`` are PostgreSQL's own (``pg_catalog``, and
    ``pg_temp``, which would make the ledger a temporary table that forgets).
    """
    if not isinstance(name, str) or not _IDENTIFIER.fullmatch(name):
        raise InvalidLedgerURL(
            f"{kind} name {name!r} is not a plain identifier "
            "(ASCII letters, digits and _, not starting with a digit, at most 63 bytes)"
        )
    if kind == "schema" and name.startswith("pg_"):
        raise InvalidLedgerURL(f"schema name {name!r}: the pg_ prefix is PostgreSQL's own")
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


_DELIMITERS = re.compile(r"[@:/?#&=%\s]+")


def secret_forms(password: str) -> list[str]:
    """Every form in which a password (or a part of it) could be echoed, longest first.

    libpq and Python split a URL's userinfo differently (the first ``@`` against the
    last), so a message may quote a piece of a password cut at a delimiter; pieces of
    three characters or more are scrubbed too, and the percent-encoded form.
    """
    forms = {password, quote(password, safe="")}
    forms.update(p for p in _DELIMITERS.split(password) if len(p) >= 3)
    return sorted((f for f in forms if f), key=len, reverse=True)


def scrub(text: str, password: str | None) -> str:
    """A driver message with any echo of the password, or of a piece of it, removed."""
    if not password:
        return text
    for form in secret_forms(password):
        text = text.replace(form, "***")
    return text


# -- SQL ---------------------------------------------------------------------------


def _literal_ms(seconds: float) -> sql.Literal:
    return sql.Literal(str(max(1, int(seconds * 1000))))


def bytea_literal(value: bytes) -> bytes:
    """``E'\\x<hex>'::bytea``: hex digits only, so no value can end the literal, and
    read the same whatever ``standard_conforming_strings`` says."""
    return b"E'\\\\x" + value.hex().encode("ascii") + b"'::bytea"


class Guard(NamedTuple):
    """What every operation proves about the store, in its own statement.

    ``genesis``: the token of the genesis row this ledger opened on (TRUNCATE or DROP
    takes it away; another opener then writes a different one). ``table_oid`` and
    ``durable``: the spends of a ledger that proves also check that its table is still
    the same, logged, permanent one and that ``fsync`` is still on (``ALTER TABLE ...
    SET UNLOGGED`` or a reload can change either after open). Reads and listings prove
    the genesis only: they acknowledge nothing, every id they can find was recorded by
    a spend that proved durability, and a table that loses ids in a crash (unlogged)
    loses its genesis row with them.
    """

    genesis: bytes
    table_oid: int
    durable: bool

    def condition(self, spend: bool) -> str:
        """The guard as a condition on the genesis row, aliased ``g``: true only when
        the store is still the one this ledger opened (and, for a spend, still keeps
        what it acknowledges)."""
        ns, rid = bytea_literal(IDENTITY_NAMESPACE), bytea_literal(IDENTITY_ID)
        text = (
            f"g.namespace = {ns.decode()} AND g.request_id = {rid.decode()} "
            f"AND g.token = {bytea_literal(self.genesis).decode()}"
        )
        if self.durable and spend:
            text += (
                " AND current_setting('fsync') = 'on' AND EXISTS (SELECT FROM "
                f"pg_catalog.pg_class AS c WHERE c.oid = {int(self.table_oid)}::oid "
                "AND c.relpersistence = 'p')"
            )
        return text


# A spend's token comes out of the guard: no genesis row (or a changed store) makes it
# NULL, and the NOT NULL column turns that into an error before any conflict check,
# in the same statement. The row count still answers (1: this call recorded the id).
_SPEND = (
    "INSERT INTO {table} (namespace, request_id, token) VALUES ({ns}, {rid}, "
    "(SELECT {token} FROM {table} AS g WHERE {guard})) "
    "ON CONFLICT (namespace, request_id) DO NOTHING"
)
# Inside a framed script an answer is a row of one statement's result set; alone, the
# statement's row count answers (no row to describe, send and decode).
_RETURNING = " RETURNING true"
_READ_TOKEN = "SELECT token FROM {table} WHERE namespace = {ns} AND request_id = {rid}"
# One row from the genesis row when the store is still the same (none: it forgot),
# holding whether the id is recorded.
_IS_SPENT = (
    "SELECT EXISTS (SELECT FROM {table} WHERE namespace = {ns} AND request_id = {rid}) "
    "FROM {table} AS g WHERE {guard}"
)
# A page of spent ids after a given one, in byte order, as one array (one row back,
# from the genesis row: none if the store forgot).
_PAGE = (
    "SELECT (SELECT array_agg(request_id ORDER BY request_id) FROM (SELECT request_id "
    "FROM {table} WHERE namespace = {ns} AND request_id > {rid} ORDER BY request_id "
    "LIMIT {token}) AS page) FROM {table} AS g WHERE {guard}"
)
PAGE_SIZE = 1000
# A batch of spends (migration): one multi-row INSERT, the spend's guard (the token
# from the genesis row, durability included) evaluated once for all rows, and the ids
# this statement recorded back as one array. A repeat within the batch conflicts with
# its first copy and is not returned.
_SPEND_MANY = (
    "WITH won AS (INSERT INTO {table} (namespace, request_id, token) "
    "SELECT {ns}, u.rid, (SELECT {token} FROM {table} AS g WHERE {guard}) "
    "FROM unnest({rid}::bytea[]) AS u(rid) "
    "ON CONFLICT (namespace, request_id) DO NOTHING RETURNING request_id) "
    "SELECT array_agg(request_id) FROM won"
)
# A batch of reads: the spent ones among the given ids, from the genesis row (none:
# the store forgot).
_SPENT_AMONG = (
    "SELECT (SELECT array_agg(request_id) FROM {table} WHERE namespace = {ns} "
    "AND request_id = ANY({rid}::bytea[])) FROM {table} AS g WHERE {guard}"
)
BATCH_SIZE = 1000
# The markers of one kind, a byte range of request_id, from the genesis row.
_MARKER_RANGE = (
    "SELECT (SELECT array_agg(request_id ORDER BY request_id) FROM {table} WHERE "
    "namespace = {ns} AND request_id >= {rid} AND request_id < {token}) "
    "FROM {table} AS g WHERE {guard}"
)
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


class Statements:
    """The ledger's statements for one table, rendered once with quoted identifiers.

    Each statement has two forms from one template: with server-side parameters (one
    statement on a session we set up), and with values bound as hex bytea literals
    inside a framed script (a session the host owns). Either way a value is data.
    Templates are rendered to bytes once: composing SQL on every call costs more than
    the rest of a call's client-side work. Opening needs no guard; the statements of
    spends and reads exist once the ledger knows its genesis (:meth:`guarded`).
    """

    def __init__(self, config: PgConfig, guard: Guard | None = None) -> None:
        self.config = config
        self.guard = guard
        self.table = sql.Identifier(config.schema, config.table)
        # The server gives up first (a clean error: nothing recorded); the client's own
        # deadline is for a server that can no longer answer at all.
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
        self._settings = sql.SQL(
            "SELECT set_config('synchronous_commit', 'on', true), "
            "set_config('statement_timeout', {ms}, true), "
            "set_config('lock_timeout', {ms}, true)"
        ).format(ms=ms)
        self.namespace = config.namespace_bytes
        self._ns = bytea_literal(self.namespace)
        # The text to_regclass() resolves: the quoted, qualified name.
        self.regclass_text = f'"{config.schema}"."{config.table}"'
        lock = uuid.uuid5(uuid.NAMESPACE_URL, f"decision-ledger:{config.qualified}").int >> 64
        self.ddl_lock_key = lock - (1 << 64) if lock >= 1 << 63 else lock
        self.read_genesis = self._render(
            sql.SQL(_READ_TOKEN).format(
                table=self.table,
                ns=sql.Literal(IDENTITY_NAMESPACE),
                rid=sql.Literal(IDENTITY_ID),
            )
        )
        if guard is not None:
            self._build(guard)

    def guarded(self, guard: Guard) -> Statements:
        """The statements of an opened ledger: each one proves ``guard``."""
        return Statements(self.config, guard)

    def _build(self, guard: Guard) -> None:
        spend, is_spent = self._bind(_SPEND, 3, guard), self._bind(_IS_SPENT, 2, guard)
        read_token = self._bind(_READ_TOKEN, 2, guard)
        self.spend = self._render(spend)  # answers with its row count: 1 if it recorded
        self.is_spent = self._render(is_spent)
        self.page = self._render(self._bind(_PAGE, 3, guard))
        self.spend_many = self._render(self._bind(_SPEND_MANY, 3, guard, spend=True))
        self.spent_among = self._render(self._bind(_SPENT_AMONG, 2, guard))
        self.marker_range = self._render(self._bind(_MARKER_RANGE, 3, guard))
        spend_returning = self._bind(_SPEND + _RETURNING, 3, guard)
        self._spend_framed = self._render(self.framed(spend_returning))
        self._is_spent_framed = self._render(self.framed(is_spent))
        # Read inside the transaction: at READ COMMITTED the SELECT takes a new snapshot
        # after the INSERT has waited out any writer of the same key; the answer only
        # counts if the COMMIT after it succeeds too (the script raises otherwise).
        self._settle = self._render(_script(_BEGIN, self._settings, spend, read_token, _COMMIT))

    def _bind(
        self, template: str, values: int, guard: Guard, spend: bool | None = None
    ) -> sql.Composed:
        names = ("ns", "rid", "token")[:values]
        condition = guard.condition(spend=template.startswith("INSERT") if spend is None else spend)
        return sql.SQL(template).format(
            table=self.table, guard=sql.SQL(condition), **{name: _P for name in names}
        )

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
        so the read that follows sees the final outcome. The INSERT proves the guard.
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

    def genesis_row(self, token: bytes) -> bytes:
        """Create the genesis row (the first opener wins; a durable commit, or a crash
        could change the store's identity), then read the one that won."""
        ns, rid, tok = (
            bytea_literal(IDENTITY_NAMESPACE).decode(),
            bytea_literal(IDENTITY_ID).decode(),
            bytea_literal(token).decode(),
        )
        insert = sql.SQL(
            "INSERT INTO {table} (namespace, request_id, token) VALUES ({ns}, {rid}, {tok}) "
            "ON CONFLICT (namespace, request_id) DO NOTHING"
        ).format(table=self.table, ns=sql.SQL(ns), rid=sql.SQL(rid), tok=sql.SQL(tok))
        read = sql.SQL(_READ_TOKEN).format(table=self.table, ns=sql.SQL(ns), rid=sql.SQL(rid))
        return self._render(_script(_BEGIN, self._settings, insert, read, _COMMIT))


PROBE = sql.SQL(
    "SELECT current_setting('fsync'), pg_is_in_recovery(), "
    "(SELECT oid FROM pg_database WHERE datname = current_database()), "
    "to_regclass(%s)::oid, "
    "has_function_privilege('pg_catalog.pg_control_system()', 'EXECUTE'), "
    "(SELECT relpersistence::text FROM pg_catalog.pg_class WHERE oid = to_regclass(%s))"
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
    persistence: str | None = None  # pg_class.relpersistence: p(ermanent), u(nlogged), t(emp)


def probe_from_row(row: tuple[Any, ...]) -> Probe:
    return Probe(
        fsync=str(row[0]),
        in_recovery=bool(row[1]),
        database_oid=int(row[2]),
        table_oid=None if row[3] is None else int(row[3]),
        may_read_control=bool(row[4]),
        persistence=None if row[5] is None else str(row[5]),
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


def _cannot_prove(probe: Probe) -> str | None:
    """Why acknowledged spends could be lost in a crash of the server process, if so."""
    if probe.fsync.lower() != "on":
        return (
            "fsync is off on this server: a crash can lose recorded ids (C2), "
            "so this ledger never proves"
        )
    if probe.persistence == "u":
        return (
            "the ledger table is unlogged: PostgreSQL empties it in crash recovery (C2), "
            "so this ledger never proves (ALTER TABLE ... SET LOGGED, then reopen)"
        )
    if probe.persistence == "t":
        return "the ledger table is temporary: it ends with its session, so it never proves"
    return None


class Opened(NamedTuple):
    """What opening found: the description, and the guard every operation proves."""

    info: LedgerInfo
    guard: Guard


def ledger_info(
    probe: Probe,
    config: PgConfig,
    location: str,
    *,
    system_identifier: str | None,
    genesis: bytes,
) -> Opened:
    """The store identity (C6): the cluster, the database, the table and its genesis
    row, plus the namespace.

    ``system_identifier`` is fixed by initdb, so another cluster (a dump restored
    elsewhere) differs; the table's OID changes when it is dropped and re-created; the
    genesis token changes when the table forgets (TRUNCATE) and is opened again. The
    fields before the namespace have fixed forms, so the namespace cannot collide.
    """
    if probe.table_oid is None:
        raise LedgerUnavailable(f"ledger table {config.qualified} is missing")
    genesis_id = uuid.UUID(bytes=genesis) if len(genesis) == 16 else None
    if genesis_id is None:
        raise UnsafeStoreConfig(f"ledger table {config.qualified}: its genesis row is malformed")
    where = f"{probe.database_oid}:{probe.table_oid}"
    if system_identifier is not None:
        store_id: str | None = f"postgres:{int(system_identifier)}:{where}:{genesis_id}"
        identity = (
            "pg_control_system().system_identifier, the database OID, the table OID and "
            "the table's genesis row"
        )
    else:
        store_id = f"postgres-row:{genesis_id}:{where}"
        identity = (
            "fallback: this role may not read pg_control_system(), so the table's genesis "
            "row, the database OID and the table OID (a dump restored into another cluster "
            "could carry the row and meet an equal OID)"
        )
    store_id = f"{store_id}:{config.namespace}"
    reason = _cannot_prove(probe)
    if reason is not None:
        store_id = None
    info = LedgerInfo(
        backend="postgres",
        store_id=store_id,
        reason=reason,
        location=location,
        namespace=config.namespace,
        identity=identity,
        durability=Durability.NONE if reason else Durability.MACHINE,
    )
    return Opened(info, Guard(genesis, probe.table_oid, durable=reason is None))


class StoreChanged(UnsafeStoreConfig):
    """The store is no longer the one this ledger opened and proved; it stays failed."""


def store_changed(config: PgConfig) -> StoreChanged:
    return StoreChanged(
        f"ledger {config.qualified}: the store forgot, or can now forget, since this ledger "
        "opened (its genesis row is gone or different: TRUNCATE, DROP and re-create; or "
        "the table is no longer logged and permanent, or fsync was turned off); this ledger "
        "stays failed: reopen it (a store that forgot gets a new store_id)"
    )


def is_guard_failure(exc: BaseException) -> bool:
    """A spend's INSERT got a NULL token: the guard found no genesis row to prove."""
    return isinstance(exc, pg_errors.NotNullViolation) and exc.diag.column_name == "token"


# -- errors (C4, C5) ---------------------------------------------------------------


class DeadlineExceeded(Exception):
    """An operation got no answer in time; its socket was shut down (outcome unknown)."""


class OutOfTime(Exception):
    """The call's one deadline passed before this op could be sent (nothing was sent)."""


class Failure(Enum):
    """What a driver exception says about a statement that may have been sent."""

    NOT_SENT = "not sent"  # no connection was had: nothing reached the server
    REJECTED = "rejected"  # the server answered with an error: the transaction rolled back
    UNKNOWN = "unknown"  # lost or timed out after sending: it may have committed


# Errors that end the session may arrive after a commit (e.g. a shutdown while waiting
# for a synchronous standby): only statement errors prove a rollback.
_SESSION_ENDING = ("08", "57P", "XX", "58")


def classify(exc: BaseException) -> Failure:
    if isinstance(exc, (PoolTimeout, PoolClosed, TooManyRequests, OutOfTime)):
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
    """The genesis token: 16 random bytes, written once by the first opener."""
    return uuid.uuid4().bytes
