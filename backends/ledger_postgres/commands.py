"""The ledger's statements, built without I/O, and :class:`Op`: one message to send.

Each statement proves in itself that the store is still the one the ledger opened
(:class:`Guard`), so identity is checked in the same round trip as every spend and
read. Values are always data: server-side parameters on a session we set up, or hex
``bytea`` literals inside a framed script on a session the host owns.
"""

from __future__ import annotations

import hashlib
import uuid
import weakref
from typing import Any, NamedTuple, cast

from psycopg import errors as pg_errors
from psycopg import generators, pq, sql
from psycopg.abc import PQGen
from psycopg.adapt import PyFormat

from .options import DEFAULT_SCHEMA, PgConfig
from .replication import NEW, TIMELINE_NOW, TOPOLOGY, timeline_condition

# One timeout bounds a whole call, pool wait and reconnects included. A first attempt
# waits for its answer at most half of it (the server is told to give up sooner, with
# a clean error), so a settle or a re-read on a new connection still fits in the rest.
FIRST_SHARE = 0.5
SERVER_SHARE = 0.4  # of the timeout, for the server's statement and lock timeouts

# A namespace's genesis row: its identity, written once (random token, durable commit)
# by its first opener, among that namespace's records under the empty request_id, which
# no id or marker can be (ids are 1-1024 bytes; markers start with 0xFF), and which
# sorts before every id (keyset pages start after it). Its token is part of store_id,
# and every operation proves it is still there in the same statement: whatever empties
# the namespace (its rows deleted, TRUNCATE, DROP) takes the genesis with the records.
GENESIS_ID = b""
# Tables made by older versions had one genesis for the whole table, under a namespace
# that is not valid UTF-8 (no ledger's). It is read only to upgrade such a table: a
# namespace that has records but no genesis of its own takes that token, so its
# store_id does not change.
IDENTITY_NAMESPACE = b"\xff"
IDENTITY_ID = b"store-identity"

PAGE_SIZE = 1000
BATCH_SIZE = 1000

Row = tuple[Any, ...] | None


class Prepared(bytes):
    """The name of a hot statement prepared on each session of the ledger's own pool,
    sent with binary parameters straight through libpq; its answer is a row count, or
    one boolean. ``setup`` (the session's settings, then the ``PREPARE``) is sent at a
    session's first use of it, inside the call: a statement that cannot be prepared
    (its table dropped, a privilege revoked) fails that call with the server's own
    error, not the pool's setup with a wait for a connection. The name carries a digest
    of the statement, so a name found on a session is always this very statement.
    """

    setup: bytes

    def __new__(cls, name: bytes, setup: bytes = b"") -> Prepared:
        label = super().__new__(cls, name)
        label.setup = setup
        return label


Query = sql.SQL | sql.Composed | bytes
BINARY = (1, 1, 1, 1)  # bytea parameters as bytes, answers as binary (a boolean: one byte)
_FATAL = pq.ExecStatus.FATAL_ERROR
_STATEMENT_GONE = pg_errors.InvalidSqlStatementName.sqlstate

# The hot statements each session of our own pool has prepared, keyed weakly by its
# connection, so the record goes with the session (measured: 0.34 us per call more
# than an attribute set on psycopg's connection, within any bench's noise).
_PREPARED: weakref.WeakKeyDictionary[Any, set[bytes]] = weakref.WeakKeyDictionary()


def _prepared_now(results: list[Any], name: Prepared, conn: Any) -> None:
    """Record that ``conn`` prepared ``name``, or raise the server's reason why not."""
    for result in results:
        if result.status == _FATAL:
            raise pg_errors.error_from_result(result, encoding=conn.info.encoding)
    _PREPARED.setdefault(conn, set()).add(name)


def prepared_gen(conn: Any, op: Op) -> PQGen[Row]:
    """A :class:`Prepared` op through libpq, as one of psycopg's own generators, which
    ``conn.wait()`` drives in either shell (under ``conn.lock``). A statement the session
    no longer has (a pooler's ``DISCARD ALL``) is prepared again on its next use (the
    decision sends it once more: see ``decisions._sent``)."""
    pgconn, params, name = conn.pgconn, op.params or (), cast(Prepared, op.query)
    setup = None if name in _PREPARED.get(conn, ()) else name.setup
    if setup is not None:  # this session's first use of it: its error is the call's
        pgconn.send_query(setup)
        _prepared_now((yield from generators.execute(pgconn)), name, conn)
    pgconn.send_query_prepared(name, params, BINARY[: len(params)], 1)
    result = (yield from generators.execute(pgconn))[-1]  # one statement: one result
    if result.status == _FATAL:  # raised as psycopg's cursor would raise it
        error = pg_errors.error_from_result(result, encoding=conn.info.encoding)
        if error.sqlstate == _STATEMENT_GONE:
            _PREPARED.get(conn, set()).discard(name)
        raise error
    if op.counted:
        return () if result.command_tuples else None
    return (result.get_value(0, 0) == b"\x01",) if result.ntuples else None


def counted(cur: Any, op: Op) -> Row:
    """A cursor's answer when it is not a row: ``()`` if a counted op touched a row."""
    return () if op.counted and cur.rowcount > 0 else None


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
    ``first``: a call's first attempt: its answer is awaited for ``FIRST_SHARE`` of the
    timeout at most, so a settle or re-read still fits in the call's one deadline.
    """

    query: Query
    params: tuple[Any, ...] | None = None
    result: int | None = 0
    fresh: bool = False
    counted: bool = False
    guarded: bool = False
    first: bool = False
    due: float = 0.0  # the call's one deadline (time.monotonic()), set by the decision


def new_identity_token() -> bytes:
    """The genesis token: 16 random bytes, written once by the first opener."""
    return uuid.uuid4().bytes


def _literal_ms(seconds: float) -> sql.Literal:
    return sql.Literal(str(max(1, int(seconds * 1000))))


def bytea_literal(value: bytes) -> bytes:
    """``E'\\x<hex>'::bytea``: hex digits only, so no value can end the literal, and
    read the same whatever ``standard_conforming_strings`` says."""
    return b"E'\\\\x" + value.hex().encode("ascii") + b"'::bytea"


# Evaluated inside each writing statement: that statement's commit waits for the WAL
# flush (and for a synchronous standby, if there is one), as a session SET would.
SYNC_COMMIT_HERE = "set_config('synchronous_commit', 'on', true) = 'on'"


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

    namespace: bytes
    genesis: bytes
    table_oid: int
    durable: bool
    # failover=keep-store-id on a proving ledger: what each spend proves about the
    # standbys (replication.spend_condition); failing it refuses that spend only.
    topology: str | None = None
    # failover=new-store-id: the timeline every statement proves (a promotion changes it).
    timeline: int | None = None

    def condition(self, spend: bool) -> str:
        """The guard as a condition on the namespace's genesis row, aliased ``g``: true
        only when the store is still the one this ledger opened (and, for a spend, still
        keeps what it acknowledges)."""
        ns, rid = bytea_literal(self.namespace), bytea_literal(GENESIS_ID)
        text = (
            f"g.namespace = {ns.decode()} AND g.request_id = {rid.decode()} "
            f"AND g.token = {bytea_literal(self.genesis).decode()}"
        )
        if self.timeline is not None:
            text += f" AND {timeline_condition(self.timeline)}"
        if spend:
            # The spend's own commit is durable whatever the session's settings are now
            # (a pooler's RESET ALL or DISCARD ALL, a transaction-mode pooler's other
            # server connection, a role's default of off): synchronous_commit is read at
            # commit, and this transaction-local value lasts until the statement's own
            # (autocommit) transaction ends. It is a conjunct of the condition the token
            # comes from, so a row written (token not NULL) proves it was evaluated.
            text += f" AND {SYNC_COMMIT_HERE}"
        if self.durable and spend:
            text += (
                " AND current_setting('fsync') = 'on' AND EXISTS (SELECT FROM "
                f"pg_catalog.pg_class AS c WHERE c.oid = {int(self.table_oid)}::oid "
                "AND c.relpersistence = 'p')"
            )
        return text

    def namespace_value(self, value: sql.Composable, spend: bool) -> sql.Composable:
        """The namespace a statement writes: NULL when the standbys no longer keep what
        the spend would acknowledge, which the NOT NULL column refuses before anything
        is written, as a refusal of its own (``errors.topology_refusal``): the store
        has not forgotten, so the ledger does not fail for good."""
        if not spend or self.topology is None:
            return value
        return sql.Composed([sql.SQL(f"CASE WHEN {self.topology} THEN "), value, sql.SQL(" END")])


# A spend's token comes out of the guard: no genesis row (or a changed store) makes it
# NULL, and the NOT NULL column turns that into an error before any conflict check,
# in the same statement. The row count still answers (1: this call recorded the id).
_SPEND = (
    "INSERT INTO {table} (namespace, request_id, token) VALUES ({ns}, {rid}, "
    "(SELECT {token} FROM {table} AS g WHERE {guard})) "
    "ON CONFLICT (namespace, request_id) DO NOTHING"
)
# C10 in one statement: the spend with the key's digest beside the token. On a
# conflict, DO UPDATE locks the stored row and sees its latest committed version (a
# concurrent writer of the same id is waited out), and its WHERE touches the row only
# when the stored digest equals ours: the row count answers (1: recorded now, or by the
# same key before; 0: another key, or a plain spend, whose digest is NULL). The guard
# is proven as for a spend (the NULL token fails the insert before the conflict check).
_SPEND_AS = (
    "INSERT INTO {table} AS r (namespace, request_id, token, attempt_digest) VALUES "
    "({ns}, {rid}, (SELECT {token} FROM {table} AS g WHERE {guard}), {digest}) "
    "ON CONFLICT (namespace, request_id) DO UPDATE SET attempt_digest = r.attempt_digest "
    "WHERE r.attempt_digest = EXCLUDED.attempt_digest"
)
# Inside a framed script an answer is a row of one statement's result set; alone, the
# statement's row count answers (no row to describe, send and decode).
_RETURNING = " RETURNING true"
_READ_TOKEN = "SELECT token FROM {table} WHERE namespace = {ns} AND request_id = {rid}"
# What opening reads about the identity, in one row: the namespace's genesis token;
# the table's old (per-table) genesis token; whether the namespace holds any row.
_READ_GENESIS = (
    "SELECT (SELECT token FROM {table} WHERE namespace = {ns} AND request_id = {rid}), "
    "(SELECT token FROM {table} WHERE namespace = {old_ns} AND request_id = {old_rid}), "
    "EXISTS (SELECT FROM {table} WHERE namespace = {ns})"
)
_READ_TOKEN_AND_DIGEST = (
    "SELECT token, attempt_digest FROM {table} WHERE namespace = {ns} AND request_id = {rid}"
)
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
# A page of the table's namespaces after a given one, in byte order: a skip scan of
# the primary key (one index probe per namespace, whatever the number of ids), from
# the genesis row (none: the store forgot). The genesis namespace (0xFF) comes last.
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
    "attempt_digest bytea, "
    "PRIMARY KEY (namespace, request_id))"
)
# A table created before re-entry (C10) gets the column: nullable, no default, so
# PostgreSQL only changes the catalog (no rewrite); existing rows read NULL (plain).
_ADD_ATTEMPT_COLUMN = "ALTER TABLE {table} ADD COLUMN IF NOT EXISTS attempt_digest bytea"
_BEGIN = sql.SQL("BEGIN ISOLATION LEVEL READ COMMITTED READ WRITE")
_COMMIT = sql.SQL("COMMIT")
_P = sql.Placeholder()
# A batch's array of ids goes in binary: the text form escapes each bytea element with a
# regex, a third of a migration's client time.
_BINARY = sql.Placeholder(format=PyFormat.BINARY)
_NAMES = ("ns", "rid", "token", "digest", "after", "limit")

# What opening reads first: the server's safety facts and the table's, in one row.
PROBE = sql.SQL(
    "SELECT current_setting('fsync'), pg_is_in_recovery(), "
    "(SELECT oid FROM pg_database WHERE datname = current_database()), "
    "to_regclass(%s)::oid, "
    "has_function_privilege('pg_catalog.pg_control_system()', 'EXECUTE'), "
    "(SELECT relpersistence::text FROM pg_catalog.pg_class WHERE oid = to_regclass(%s)), "
    "EXISTS (SELECT FROM pg_catalog.pg_attribute WHERE attrelid = to_regclass(%s) "
    "AND attname = 'attempt_digest' AND NOT attisdropped)"
)
SYSTEM_IDENTIFIER = sql.SQL("SELECT system_identifier::text FROM pg_catalog.pg_control_system()")
# What the doctor re-reads (read-only): the version and the defaults it shows.
DOCTOR_SETTINGS = sql.SQL(
    "SELECT current_setting('server_version'), current_setting('server_version_num')::int, "
    "(SELECT reset_val FROM pg_catalog.pg_settings WHERE name = 'synchronous_commit'), "
    "current_setting('full_page_writes')"
)


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

    # Framed scripts answer with one result set per statement; these are the ones read.
    FRAMED_RESULT = 2
    SETTLE_RESULT = 3

    def __init__(
        self, config: PgConfig, guard: Guard | None = None, reentrant: bool = True
    ) -> None:
        self.config = config
        self.guard = guard
        self.reentrant = reentrant  # the table has C10's attempt_digest column
        self.table = sql.Identifier(config.schema, config.table)
        # The server gives up first (a clean error: nothing recorded); the client's own
        # deadline is for a server that can no longer answer at all.
        ms = _literal_ms(config.timeout * SERVER_SHARE)
        # Our own pool sets each session up once; a spend is then one autocommit INSERT:
        # its own transaction, at READ COMMITTED, with a durable commit (which the
        # statement also sets for itself: a pooler may reset the session's settings).
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
            sql.SQL(_READ_GENESIS).format(
                table=self.table,
                ns=sql.SQL(self._ns.decode()),
                rid=sql.SQL(bytea_literal(GENESIS_ID).decode()),
                old_ns=sql.SQL(bytea_literal(IDENTITY_NAMESPACE).decode()),
                old_rid=sql.SQL(bytea_literal(IDENTITY_ID).decode()),
            )
        )
        timeline = TIMELINE_NOW if config.failover == NEW else "NULL"
        self.topology = self._render(sql.SQL(TOPOLOGY.format(timeline=timeline)))
        if guard is not None:
            self._build(guard)

    def guarded(self, guard: Guard, reentrant: bool) -> Statements:
        """The statements of an opened ledger: each one proves ``guard``."""
        return Statements(self.config, guard, reentrant)

    def _build(self, guard: Guard) -> None:
        spend, is_spent = self._bind(_SPEND, guard), self._bind(_IS_SPENT, guard)
        spend_as = self._bind(_SPEND_AS, guard)
        self.spend = self._render(spend)  # answers with its row count: 1 if it recorded
        self.spend_as = self._render(spend_as)  # 1: recorded now, or by the same key
        self.is_spent = self._render(is_spent)
        self.page = self._render(self._bind(_PAGE, guard))
        self.namespaces = self._render(self._bind(_NAMESPACES, guard))
        self.spend_many = self._render(self._bind(_SPEND_MANY, guard, spend=True))
        self.spent_among = self._render(self._bind(_SPENT_AMONG, guard))
        self.marker_range = self._render(self._bind(_MARKER_RANGE, guard))
        self._spend_framed = self._render(self.framed(self._bind(_SPEND + _RETURNING, guard)))
        self._spend_as_framed = self._render(self.framed(self._bind(_SPEND_AS + _RETURNING, guard)))
        self._is_spent_framed = self._render(self.framed(is_spent))
        # The hot statements, prepared once per session of our own pool.
        self.spend_prepared = self._prepare("spend", _SPEND, guard, 3)
        self.is_spent_prepared = self._prepare("is_spent", _IS_SPENT, guard, 2)
        # A table without the column (create=false) cannot even prepare it: spend_as
        # is then refused before any I/O (decisions.spend_as).
        label = Prepared(b"decision_ledger_spend_as")
        self.spend_as_prepared = (
            self._prepare("spend_as", _SPEND_AS, guard, 4) if self.reentrant else label
        )
        # Read inside the transaction: at READ COMMITTED the SELECT takes a new snapshot
        # after the INSERT has waited out any writer of the same key; the answer only
        # counts if the COMMIT after it succeeds too (the script raises otherwise).
        read_token = self._bind(_READ_TOKEN, guard)
        self._settle = self._render(_script(_BEGIN, self._settings, spend, read_token, _COMMIT))
        read_both = self._bind(_READ_TOKEN_AND_DIGEST, guard)
        self._settle_as = self._render(
            _script(_BEGIN, self._settings, spend_as, read_both, _COMMIT)
        )

    def _prepare(self, name: str, template: str, guard: Guard, values: int) -> Prepared:
        """The hot statement ``template`` (bytea parameters ``$1``..) as a
        :class:`Prepared` whose ``setup`` (the session's settings, then its ``PREPARE``)
        a shell sends on each session's first use of it."""
        numbered: dict[str, sql.Composable]
        numbered = {key: sql.SQL(f"${n}") for n, key in enumerate(_NAMES[:values], 1)}
        spend = template.startswith("INSERT")
        numbered["ns"] = guard.namespace_value(numbered["ns"], spend)
        condition = guard.condition(spend=spend)
        body = self._render(
            sql.SQL(template).format(table=self.table, guard=sql.SQL(condition), **numbered)
        )
        # The order in which the template names its values is ns, rid, token, digest.
        digest = hashlib.sha256(body).hexdigest()[:24]
        label = f"decision_ledger_{name}_{digest}"
        types = ", ".join(["bytea"] * values)
        statement = f'PREPARE "{label}" ({types}) AS '.encode() + body
        return Prepared(label.encode(), b"; ".join([self.session_script(), statement]))

    def session_script(self) -> bytes:
        """What a new session of our own pool runs once (``configure``): the session
        settings. The hot statements are prepared at their first use (:class:`Prepared`)."""
        return self._render(self.session_setup)

    def _bind(self, template: str, guard: Guard, spend: bool | None = None) -> sql.Composed:
        """``template`` with the guard and a placeholder for each value, in text order."""
        spend = template.startswith("INSERT") if spend is None else spend
        values: dict[str, sql.Composable] = dict.fromkeys(_NAMES, _P)
        values["ns"] = guard.namespace_value(_P, spend)
        if "{rid}::bytea[]" in template:
            values["rid"] = _BINARY
        return sql.SQL(template).format(
            table=self.table, guard=sql.SQL(guard.condition(spend=spend)), **values
        )

    @staticmethod
    def _render(statement: sql.Composable) -> bytes:
        # Identifiers are plain (validated) names: no connection is needed to quote them.
        return statement.as_bytes(None)

    def framed(self, statement: sql.Composable) -> sql.Composed:
        """``statement`` in its own READ COMMITTED transaction with a durable commit."""
        return _script(_BEGIN, self._settings, statement, _COMMIT)

    def _literals(self, *values: bytes | None) -> tuple[bytes, ...]:
        return (self._ns, *(bytea_literal(v) for v in values if v is not None))

    def spend_framed(self, request_id: bytes, token: bytes, digest: bytes | None = None) -> bytes:
        values = self._literals(request_id, token, digest)
        return (self._spend_framed if digest is None else self._spend_as_framed) % values

    def is_spent_framed(self, request_id: bytes) -> bytes:
        return self._is_spent_framed % self._literals(request_id)

    def settle(self, request_id: bytes, token: bytes, digest: bytes | None = None) -> bytes:
        """Insert again with the same token (and digest), then read whose token (and
        digest) is stored (C5). If the first write is still in flight, the INSERT waits
        on its unique-key lock, so the read that follows sees the final outcome. The
        INSERT proves the guard."""
        values = (*self._literals(request_id, token, digest), *self._literals(request_id))
        return (self._settle if digest is None else self._settle_as) % values

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
        statements += [
            sql.SQL(_CREATE_TABLE).format(table=self.table),
            sql.SQL(_ADD_ATTEMPT_COLUMN).format(table=self.table),
            _COMMIT,
        ]
        return _script(*statements)

    def genesis_row(self, token: bytes, upgrade: bool = False) -> tuple[bytes, int]:
        """Create the namespace's genesis row (the first opener wins; a durable commit,
        or a crash could change the store's identity), then read the one that won.

        ``upgrade`` (a table made by an older version, whose namespace has records and
        no genesis): the namespace takes the table's old genesis token, so its store_id
        stays, but only if it still has records once no one can write to the table
        (``SHARE`` mode waits out and blocks every writer until this commits): a
        namespace emptied meanwhile gets ``token``, a new store_id. Only the table's
        owner (or a role that may UPDATE or DELETE it) may take that lock. Returns the
        script and the index of the result set that answers.
        """
        ns, rid = self._ns.decode(), bytea_literal(GENESIS_ID).decode()
        value: sql.Composable = sql.SQL(bytea_literal(token).decode())
        statements: list[sql.Composable] = [_BEGIN, self._settings]
        if upgrade:
            statements.append(sql.SQL("LOCK TABLE {} IN SHARE MODE").format(self.table))
            value = sql.SQL(
                "COALESCE((SELECT o.token FROM {table} AS o WHERE o.namespace = {old_ns} "
                "AND o.request_id = {old_rid} AND EXISTS (SELECT FROM {table} "
                "WHERE namespace = {ns})), {tok})"
            ).format(
                table=self.table,
                old_ns=sql.SQL(bytea_literal(IDENTITY_NAMESPACE).decode()),
                old_rid=sql.SQL(bytea_literal(IDENTITY_ID).decode()),
                ns=sql.SQL(ns),
                tok=value,
            )
        insert = sql.SQL(
            "INSERT INTO {table} (namespace, request_id, token) VALUES ({ns}, {rid}, {tok}) "
            "ON CONFLICT (namespace, request_id) DO NOTHING"
        ).format(table=self.table, ns=sql.SQL(ns), rid=sql.SQL(rid), tok=value)
        read = sql.SQL(_READ_TOKEN).format(table=self.table, ns=sql.SQL(ns), rid=sql.SQL(rid))
        return self._render(_script(*statements, insert, read, _COMMIT)), len(statements) + 1
