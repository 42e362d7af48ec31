"""The ledger's statements, built once without I/O, and the prepared ones' libpq exchange.

Each statement proves the store is still the one the ledger opened (:class:`Guard`) in
the same round trip. Values are always data: server-side parameters on our sessions,
hex ``bytea`` literals in a framed script on a host's.
"""

from __future__ import annotations

import hashlib
import uuid
import weakref
from typing import Any, NamedTuple

from psycopg import errors as pg_errors
from psycopg import generators, pq, sql
from psycopg.abc import PQGen
from psycopg.adapt import PyFormat

from .options import DEFAULT_SCHEMA, PgConfig
from .replication import NEW, TIMELINE_NOW, TOPOLOGY, timeline_condition

# A first attempt waits at most half a call's timeout, so a settle or re-read still fits.
FIRST_SHARE = 0.5
SERVER_SHARE = 0.4  # of the timeout, for the server's statement and lock timeouts

# A namespace's genesis row, under the empty request_id (no id or marker can be empty):
# whatever empties the namespace (DELETE, TRUNCATE, DROP) takes it with the records.
GENESIS_ID = b""
# Older tables' one per-table genesis (a namespace no ledger's): read only to upgrade.
IDENTITY_NAMESPACE = b"\xff"
IDENTITY_ID = b"store-identity"

PAGE_SIZE = 1000
BATCH_SIZE = 1000

Row = tuple[Any, ...] | None


class Prepared(bytes):
    """A hot statement's name (with a digest of its text) on our own sessions, sent
    straight through libpq. ``setup`` (settings, then ``PREPARE``) is sent at a session's
    first use, inside the call: a failure to prepare is that call's own error."""

    setup: bytes

    def __new__(cls, name: bytes, setup: bytes = b"") -> Prepared:
        label = super().__new__(cls, name)
        label.setup = setup
        return label


Query = sql.SQL | sql.Composed | bytes
BINARY = (1, 1, 1, 1)  # bytea parameters as bytes, answers as binary (a boolean: one byte)
_FATAL = pq.ExecStatus.FATAL_ERROR
_STATEMENT_GONE = pg_errors.InvalidSqlStatementName.sqlstate

# The hot statements each of our sessions has prepared, keyed weakly by connection.
_PREPARED: weakref.WeakKeyDictionary[Any, set[bytes]] = weakref.WeakKeyDictionary()


def executed(conn: Any, name: Prepared, params: tuple[Any, ...]) -> PQGen[Any]:
    """A prepared statement's result, straight through libpq, for ``conn.wait()`` under
    ``conn.lock``. Prepared at the session's first use (its error is the call's); a
    statement the session lost (``DISCARD ALL``) is prepared again and sent once more
    (an ``EXECUTE`` of a missing statement ran nothing); gone twice, the error is raised.
    Errors are raised as psycopg's cursor would raise them."""
    pgconn = conn.pgconn
    for attempt in (1, 2):
        if name not in _PREPARED.get(conn, ()):
            pgconn.send_query(name.setup)
            for result in (yield from generators.execute(pgconn)):
                if result.status == _FATAL:
                    raise pg_errors.error_from_result(result, encoding=conn.info.encoding)
            _PREPARED.setdefault(conn, set()).add(name)
        pgconn.send_query_prepared(name, params, BINARY[: len(params)], 1)
        result = (yield from generators.execute(pgconn))[-1]  # one statement: one result
        if result.status != _FATAL:
            return result
        error = pg_errors.error_from_result(result, encoding=conn.info.encoding)
        if error.sqlstate != _STATEMENT_GONE or attempt == 2:
            raise error
        _PREPARED[conn].discard(name)
    raise AssertionError("unreachable")


def new_identity_token() -> bytes:
    return uuid.uuid4().bytes


def bytea_literal(value: bytes) -> bytes:
    """``E'\\x<hex>'::bytea``: hex digits only, so no value can end the literal, and
    read the same whatever ``standard_conforming_strings`` says."""
    return b"E'\\\\x" + value.hex().encode("ascii") + b"'::bytea"


_GENESIS_RID = bytea_literal(GENESIS_ID).decode()
_OLD_GENESIS = {  # the table's old genesis row, for an upgrade
    "old_ns": sql.SQL(bytea_literal(IDENTITY_NAMESPACE).decode()),
    "old_rid": sql.SQL(bytea_literal(IDENTITY_ID).decode()),
}


# Evaluated inside each writing statement: that statement's commit waits for the WAL
# flush (and for a synchronous standby, if there is one), as a session SET would.
SYNC_COMMIT_HERE = "set_config('synchronous_commit', 'on', true) = 'on'"


class Guard(NamedTuple):
    """What every operation proves about the store, in its own statement.

    Every statement proves the ``genesis`` token. A proving ledger's spends also prove
    the table is still ``table_oid``, logged and permanent, with ``fsync`` on; reads
    acknowledge nothing, and an unlogged table loses its genesis row with its ids.
    """

    namespace: bytes
    genesis: bytes
    table_oid: int
    durable: bool
    # failover=keep-store-id on a proving ledger: what each spend proves about the
    # standbys (replication.spend_condition); failing it refuses that spend only.
    topology: str | None = None
    # failover=new-store-id: the timeline every statement proves (a promotion changes it).
    timeline: int | None = None
    # The genesis row's xmin: a restored (COPY) or re-inserted row has another (C6).
    xmin: int | None = None
    # The table's storage file at open (pg_relation_filenode): see write_condition.
    filenode: int | None = None

    def condition(self, spend: bool) -> str:
        """The guard as a condition on the genesis row, aliased ``g``."""
        ns, rid = bytea_literal(self.namespace), bytea_literal(GENESIS_ID)
        text = (
            f"g.namespace = {ns.decode()} AND g.request_id = {rid.decode()} "
            f"AND g.token = {bytea_literal(self.genesis).decode()}"
        )
        if self.xmin is not None:
            text += f" AND g.xmin = '{int(self.xmin)}'::xid"
        if self.timeline is not None:
            text += f" AND {timeline_condition(self.timeline)}"
        if spend:
            text += f" AND {self.write_condition()}"
        return text

    def write_condition(self) -> str:
        """What a spend that records proves beyond the genesis: a durable commit whatever
        the session's settings now (a pooler's RESET ALL, a role's default), and on a
        proving ledger ``fsync`` on and the table still logged and permanent. Its storage
        file unchanged since open proves the latter without reading ``pg_class`` (a
        change of persistence rewrites the table into a new file); after a rewrite
        (``VACUUM FULL``, ``CLUSTER``) the catalog is read."""
        if not self.durable:
            return SYNC_COMMIT_HERE
        oid = f"{int(self.table_oid)}::oid"
        same_file = (
            "false"
            if self.filenode is None
            else (f"pg_catalog.pg_relation_filenode({oid}) = {int(self.filenode)}::oid")
        )
        return (
            f"{SYNC_COMMIT_HERE} AND current_setting('fsync') = 'on' AND ({same_file} OR "
            f"EXISTS (SELECT FROM pg_catalog.pg_class AS c WHERE c.oid = {oid} "
            "AND c.relpersistence = 'p'))"
        )

    def namespace_value(self, value: sql.Composable, spend: bool) -> sql.Composable:
        """NULL when the standbys no longer keep what the spend would acknowledge: the
        NOT NULL column refuses it, a refusal that does not fail the ledger for good."""
        if not spend or self.topology is None:
            return value
        return sql.Composed([sql.SQL(f"CASE WHEN {self.topology} THEN "), value, sql.SQL(" END")])


# The token comes out of the guard: a changed store makes it NULL, which the NOT NULL
# column refuses before any conflict check. Row count 1: this call recorded the id.
# The prepared form proves the genesis on every spend, and what a recording spend proves
# more (durability, the standbys: their price is most of a spend's server time) only when
# the id is not there yet: a spent id acknowledges nothing new (a concurrent writer of
# the same id is still met by ON CONFLICT, after the full proof).
_SPEND_PREPARED = (
    "INSERT INTO {table} (namespace, request_id, token) "
    "SELECT {ns}, {rid}, CASE WHEN {write} THEN v.token END "
    "FROM (SELECT (SELECT {token} FROM {table} AS g WHERE {genesis}) AS token) AS v "
    "WHERE v.token IS NULL OR NOT EXISTS (SELECT FROM {table} AS e "
    "WHERE e.namespace = {key} AND e.request_id = {rid}) "
    "ON CONFLICT (namespace, request_id) DO NOTHING"
)
_SPEND = (
    "INSERT INTO {table} (namespace, request_id, token) VALUES ({ns}, {rid}, "
    "(SELECT {token} FROM {table} AS g WHERE {guard})) "
    "ON CONFLICT (namespace, request_id) DO NOTHING"
)
# C10: on a conflict DO UPDATE locks the row (a concurrent writer is waited out) and
# touches it only when the stored digest equals ours: row count 1, recorded now or by
# the same key before; 0, another key or a plain spend (digest NULL).
_SPEND_AS = (
    "INSERT INTO {table} AS r (namespace, request_id, token, attempt_digest) VALUES "
    "({ns}, {rid}, (SELECT {token} FROM {table} AS g WHERE {guard}), {digest}) "
    "ON CONFLICT (namespace, request_id) DO UPDATE SET attempt_digest = r.attempt_digest "
    "WHERE r.attempt_digest = EXCLUDED.attempt_digest"
)
_RETURNING = " RETURNING true"
_READ_TOKEN = "SELECT token FROM {table} WHERE namespace = {ns} AND request_id = {rid}"
# The genesis row's token and xmin (the transaction that wrote it: a restore's is another).
_GENESIS_ROW = "SELECT token, xmin::text FROM {table} WHERE namespace = {ns} AND request_id = {rid}"
# The namespace's genesis and its xmin, the table's old genesis, whether the namespace
# has rows.
_READ_GENESIS = (
    "SELECT g.token, g.xmin::text, "
    "(SELECT token FROM {table} WHERE namespace = {old_ns} AND request_id = {old_rid}), "
    "EXISTS (SELECT FROM {table} WHERE namespace = {ns}) "
    "FROM (SELECT) AS one LEFT JOIN {table} AS g ON g.namespace = {ns} AND g.request_id = {rid}"
)
_READ_TOKEN_AND_DIGEST = (
    "SELECT token, attempt_digest FROM {table} WHERE namespace = {ns} AND request_id = {rid}"
)
_IS_SPENT = (
    "SELECT EXISTS (SELECT FROM {table} WHERE namespace = {ns} AND request_id = {rid}) "
    "FROM {table} AS g WHERE {guard}"
)
_PAGE = (
    "SELECT (SELECT array_agg(request_id ORDER BY request_id) FROM (SELECT request_id "
    "FROM {table} WHERE namespace = {ns} AND request_id > {rid} ORDER BY request_id "
    "LIMIT {token}) AS page) FROM {table} AS g WHERE {guard}"
)
# A skip scan of the primary key: one index probe per namespace, whatever the ids.
_NAMESPACES = (
    "WITH RECURSIVE ns(n, k) AS ("
    "SELECT (SELECT namespace FROM {table} WHERE namespace > {after} "
    "ORDER BY namespace LIMIT 1), 1 "
    "UNION ALL SELECT (SELECT namespace FROM {table} WHERE namespace > ns.n "
    "ORDER BY namespace LIMIT 1), k + 1 "
    "FROM ns WHERE ns.n IS NOT NULL AND k < {limit}) "
    "SELECT (SELECT array_agg(n ORDER BY n) FROM ns WHERE n IS NOT NULL) "
    "FROM {table} AS g WHERE {guard}"
)
# A batch of spends: one INSERT, the guard evaluated once, the ids recorded returned.
_SPEND_MANY = (
    "WITH won AS (INSERT INTO {table} (namespace, request_id, token) "
    "SELECT {ns}, u.rid, (SELECT {token} FROM {table} AS g WHERE {guard}) "
    "FROM unnest({rid}::bytea[]) AS u(rid) "
    "ON CONFLICT (namespace, request_id) DO NOTHING RETURNING request_id) "
    "SELECT array_agg(request_id) FROM won"
)
_SPENT_AMONG = (
    "SELECT (SELECT array_agg(request_id) FROM {table} WHERE namespace = {ns} "
    "AND request_id = ANY({rid}::bytea[])) FROM {table} AS g WHERE {guard}"
)
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
    "attempt_digest bytea, "
    "PRIMARY KEY (namespace, request_id))"
)
# Nullable, no default: only the catalog changes (no rewrite).
_ADD_ATTEMPT_COLUMN = "ALTER TABLE {table} ADD COLUMN IF NOT EXISTS attempt_digest bytea"
_BEGIN = sql.SQL("BEGIN ISOLATION LEVEL READ COMMITTED READ WRITE")
_COMMIT = sql.SQL("COMMIT")
_P = sql.Placeholder()
# Binary: the text form's per-element escaping was a third of a migration's client time.
_BINARY = sql.Placeholder(format=PyFormat.BINARY)
_NAMES = ("ns", "rid", "token", "digest", "after", "limit")

PROBE = sql.SQL(
    "SELECT current_setting('fsync'), pg_is_in_recovery(), "
    "(SELECT oid FROM pg_database WHERE datname = current_database()), "
    "to_regclass(%s)::oid, "
    "has_function_privilege('pg_catalog.pg_control_system()', 'EXECUTE'), "
    "(SELECT relpersistence::text FROM pg_catalog.pg_class WHERE oid = to_regclass(%s)), "
    "EXISTS (SELECT FROM pg_catalog.pg_attribute WHERE attrelid = to_regclass(%s) "
    "AND attname = 'attempt_digest' AND NOT attisdropped), "
    "pg_catalog.pg_relation_filenode(to_regclass(%s))"
)
SYSTEM_IDENTIFIER = sql.SQL("SELECT system_identifier::text FROM pg_catalog.pg_control_system()")
DOCTOR_SETTINGS = sql.SQL(
    "SELECT current_setting('server_version'), current_setting('server_version_num')::int, "
    "(SELECT reset_val FROM pg_catalog.pg_settings WHERE name = 'synchronous_commit'), "
    "current_setting('full_page_writes')"
)


class Statements:
    """The ledger's statements for one table, each from one template in two forms
    (parameters on our sessions, a framed script of literals on a host's), rendered to
    bytes once: composing SQL per call costs more than the rest of a call."""

    FRAMED_RESULT = 2
    SETTLE_RESULT = 3

    def __init__(
        self, config: PgConfig, guard: Guard | None = None, reentrant: bool = True
    ) -> None:
        self.config = config
        self.guard = guard
        self.reentrant = reentrant  # the table has C10's attempt_digest column
        self.table = sql.Identifier(config.schema, config.table)
        # The server gives up first, with a clean error; the client's deadline is later.
        ms = sql.Literal(str(max(1, int(config.timeout * SERVER_SHARE * 1000))))
        setup = sql.SQL(
            "SET synchronous_commit = on; "
            "SET default_transaction_isolation = 'read committed'; "
            "SET default_transaction_read_only = off; "
            "SET statement_timeout = {ms}; SET lock_timeout = {ms}; "
            "SET idle_in_transaction_session_timeout = {ms}"
        ).format(ms=ms)
        self.session_script = self._render(setup)
        # A host's session is left as it is: framed statements set these locally.
        self._settings = sql.SQL(
            "SELECT set_config('synchronous_commit', 'on', true), "
            "set_config('statement_timeout', {ms}, true), "
            "set_config('lock_timeout', {ms}, true)"
        ).format(ms=ms)
        self.namespace = config.namespace_bytes
        self._ns = bytea_literal(self.namespace)
        self.regclass_text = f'"{config.schema}"."{config.table}"'
        lock = uuid.uuid5(uuid.NAMESPACE_URL, f"decision-ledger:{config.qualified}").int >> 64
        self.ddl_lock_key = lock - (1 << 64) if lock >= 1 << 63 else lock
        self.read_genesis = self._render(
            sql.SQL(_READ_GENESIS).format(
                table=self.table,
                ns=sql.SQL(self._ns.decode()),
                rid=sql.SQL(_GENESIS_RID),
                **_OLD_GENESIS,
            )
        )
        timeline = TIMELINE_NOW if config.failover == NEW else "NULL"
        self.topology = self._render(sql.SQL(TOPOLOGY.format(timeline=timeline)))
        if guard is not None:
            self._build(guard)

    def guarded(self, guard: Guard, reentrant: bool) -> Statements:
        return Statements(self.config, guard, reentrant)

    def _build(self, guard: Guard) -> None:
        spend, is_spent = self._bind(_SPEND, guard), self._bind(_IS_SPENT, guard)
        spend_as = self._bind(_SPEND_AS, guard)
        self.is_spent = self._render(is_spent)
        self.page = self._render(self._bind(_PAGE, guard))
        self.namespaces = self._render(self._bind(_NAMESPACES, guard))
        self.spend_many = self._render(self._bind(_SPEND_MANY, guard))
        self.spent_among = self._render(self._bind(_SPENT_AMONG, guard))
        self.marker_range = self._render(self._bind(_MARKER_RANGE, guard))
        self._spend_framed = self._render(self.framed(self._bind(_SPEND + _RETURNING, guard)))
        self._spend_as_framed = self._render(self.framed(self._bind(_SPEND_AS + _RETURNING, guard)))
        self._is_spent_framed = self._render(self.framed(is_spent))
        self.spend_prepared = self._prepare("spend", _SPEND_PREPARED, guard, 3)
        self.is_spent_prepared = self._prepare("is_spent", _IS_SPENT, guard, 2)
        # A table without the column cannot prepare it (spend_as is refused before I/O).
        label = Prepared(b"decision_ledger_spend_as")
        self.spend_as_prepared = (
            self._prepare("spend_as", _SPEND_AS, guard, 4) if self.reentrant else label
        )
        # At READ COMMITTED the SELECT's new snapshot follows the INSERT's wait for any
        # writer of the same key; the answer counts only if the COMMIT succeeds too.
        self._settle = self._render(self.framed(spend, self._bind(_READ_TOKEN, guard)))
        read_both = self._bind(_READ_TOKEN_AND_DIGEST, guard)
        self._settle_as = self._render(self.framed(spend_as, read_both))

    def _prepare(self, name: str, template: str, guard: Guard, values: int) -> Prepared:
        numbered = {key: sql.SQL(f"${n}") for n, key in enumerate(_NAMES[:values], 1)}
        numbered["key"] = numbered["ns"]  # the namespace, never wrapped in the topology
        body = self._render(self._bind(template, guard, **numbered))
        digest = hashlib.sha256(body).hexdigest()[:24]
        label = f"decision_ledger_{name}_{digest}"
        types = ", ".join(["bytea"] * values)
        statement = f'PREPARE "{label}" ({types}) AS '.encode() + body
        return Prepared(label.encode(), b"; ".join([self.session_script, statement]))

    def _bind(self, template: str, guard: Guard, **numbered: sql.Composable) -> sql.Composed:
        """``numbered``: a PREPARE's parameters ($1...), else %s (an array's binary)."""
        spend = "INSERT" in template  # a spend's guard proves more (Guard.condition)
        values: dict[str, sql.Composable] = dict.fromkeys(_NAMES, _P)
        if "{rid}::bytea[]" in template:
            values["rid"] = _BINARY
        values.update(numbered)
        values["ns"] = guard.namespace_value(values["ns"], spend)
        return sql.SQL(template).format(
            table=self.table,
            guard=sql.SQL(guard.condition(spend=spend)),
            genesis=sql.SQL(guard.condition(spend=False)),
            write=sql.SQL(guard.write_condition()),
            **values,
        )

    @staticmethod
    def _render(statement: sql.Composable) -> bytes:
        return statement.as_bytes(None)

    def framed(self, *statements: sql.Composable) -> sql.Composed:
        """One READ COMMITTED transaction with a durable commit, in one round trip."""
        return sql.SQL("; ").join([_BEGIN, self._settings, *statements, _COMMIT])

    def _literals(self, *values: bytes | None) -> tuple[bytes, ...]:
        return (self._ns, *(bytea_literal(v) for v in values if v is not None))

    def spend_framed(self, request_id: bytes, token: bytes, digest: bytes | None = None) -> bytes:
        values = self._literals(request_id, token, digest)
        return (self._spend_framed if digest is None else self._spend_as_framed) % values

    def is_spent_framed(self, request_id: bytes) -> bytes:
        return self._is_spent_framed % self._literals(request_id)

    def settle(self, request_id: bytes, token: bytes, digest: bytes | None = None) -> bytes:
        """Insert again with the same token (and digest), then read whose is stored (C5)."""
        values = (*self._literals(request_id, token, digest), *self._literals(request_id))
        return (self._settle if digest is None else self._settle_as) % values

    def reidentify(self, token: bytes) -> bytes:
        """A fresh genesis ``token`` over the row the guard proves, durably committed;
        its result (index ``FRAMED_RESULT``) has no row when the guard fails."""
        assert self.guard is not None  # a guarded ledger's statements only
        update = sql.SQL("UPDATE {table} AS g SET token = {tok} WHERE {guard} RETURNING true")
        tok, guard = bytea_literal(token).decode(), self.guard.condition(spend=False)
        return self._render(
            self.framed(update.format(table=self.table, tok=sql.SQL(tok), guard=sql.SQL(guard)))
        )

    def ddl(self) -> sql.Composed:
        """Under an advisory lock: two ``CREATE TABLE IF NOT EXISTS`` at once can fail."""
        lock = sql.SQL("SELECT pg_advisory_xact_lock({})").format(sql.Literal(self.ddl_lock_key))
        statements: list[sql.Composable] = [lock]
        if self.config.schema != DEFAULT_SCHEMA:
            statements.append(
                sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(self.config.schema))
            )
        create = sql.SQL(_CREATE_TABLE).format(table=self.table)
        return self.framed(
            *statements, create, sql.SQL(_ADD_ATTEMPT_COLUMN).format(table=self.table)
        )

    def genesis_row(self, token: bytes, upgrade: bool = False) -> tuple[bytes, int]:
        """Create the genesis row (first opener wins, durable commit), read the winner's
        token and xmin; and the index of the result set that answers.

        ``upgrade``: the namespace takes the old table's token (its store_id stays) only
        if it still has records under ``SHARE`` mode, which blocks every writer.
        """
        ns, rid = self._ns.decode(), _GENESIS_RID
        value: sql.Composable = sql.SQL(bytea_literal(token).decode())
        statements: list[sql.Composable] = []
        if upgrade:
            statements.append(sql.SQL("LOCK TABLE {} IN SHARE MODE").format(self.table))
            value = sql.SQL(
                "COALESCE((SELECT o.token FROM {table} AS o WHERE o.namespace = {old_ns} "
                "AND o.request_id = {old_rid} AND EXISTS (SELECT FROM {table} "
                "WHERE namespace = {ns})), {tok})"
            ).format(table=self.table, ns=sql.SQL(ns), tok=value, **_OLD_GENESIS)
        insert = sql.SQL(
            "INSERT INTO {table} (namespace, request_id, token) VALUES ({ns}, {rid}, {tok}) "
            "ON CONFLICT (namespace, request_id) DO NOTHING"
        ).format(table=self.table, ns=sql.SQL(ns), rid=sql.SQL(rid), tok=value)
        read = sql.SQL(_GENESIS_ROW).format(table=self.table, ns=sql.SQL(ns), rid=sql.SQL(rid))
        return self._render(self.framed(*statements, insert, read)), len(statements) + 3
