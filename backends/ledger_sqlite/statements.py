"""The SQLite ledger's schema and statements (no I/O).

Each namespace's identity is a genesis row of its own in the records table (under the
empty request id, which no request id or marker can be), holding a random uuid that is
part of its ``store_id``. Every spend and every read proves, in the same statement (one
transaction), that the genesis this ledger opened is still there: emptying one namespace,
the records table, or the whole file (``DELETE``, a dropped and re-created table, a file
replaced by another) takes the genesis with the records, and the ledger raises instead
of answering from a store it never knew.
"""

from __future__ import annotations

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS decision_ledger_meta (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS decision_ledger (
        namespace TEXT NOT NULL,
        request_id BLOB NOT NULL,
        token BLOB NOT NULL,
        spent_at REAL NOT NULL,
        holder BLOB,
        PRIMARY KEY (namespace, request_id)
    ) WITHOUT ROWID""",
)
# ``holder`` (C10: the attempt key's digest; NULL for a plain spend) came after the first
# release: a file made by an older version gets it when opened with create allowed.
COLUMNS = "SELECT name FROM pragma_table_info('decision_ledger')"
ADD_HOLDER = "ALTER TABLE decision_ledger ADD COLUMN holder BLOB"

# The file's uuid (what older versions took as every namespace's identity; still written
# for them) seeds the genesis of each namespace that holds records in a file of an older
# version, once, in the transaction that marks the file's layout: their store_ids stay.
# Any genesis made later (a new namespace, one that forgot) is a new random uuid; and a
# namespace without records is never seeded, so even a file whose layout mark was
# deleted cannot give an emptied namespace its old store_id back.
CREATE_IDENTITY = (
    "INSERT INTO decision_ledger_meta (key, value) VALUES ('store_uuid', ?) "
    "ON CONFLICT (key) DO NOTHING"
)
UPGRADE = (
    "INSERT INTO decision_ledger (namespace, request_id, token, spent_at) "
    "SELECT DISTINCT n.namespace, x'', CAST(m.value AS BLOB), ? "
    "FROM decision_ledger AS n, decision_ledger_meta AS m WHERE m.key = 'store_uuid' "
    "AND NOT EXISTS (SELECT 1 FROM decision_ledger_meta WHERE key = 'layout') "
    "ON CONFLICT (namespace, request_id) DO NOTHING"
)
MARK_LAYOUT = (
    "INSERT INTO decision_ledger_meta (key, value) VALUES ('layout', 'genesis-rows') "
    "ON CONFLICT (key) DO NOTHING"
)
CREATE_GENESIS = (
    "INSERT INTO decision_ledger (namespace, request_id, token, spent_at) "
    "VALUES (?, x'', ?, ?) ON CONFLICT (namespace, request_id) DO NOTHING"
)
# A fresh genesis for the namespace (``reidentify``), written only over the one the
# ledger opened. Parameters: the new genesis, namespace, the genesis opened, time.
REIDENTIFY = (
    "UPDATE decision_ledger SET token = ?1, spent_at = ?4 "
    "WHERE namespace = ?2 AND request_id = x'' AND token = ?3"
)
# (the file's layout, or NULL: made by an older version; the namespace's genesis, or NULL)
READ_IDENTITY = (
    "SELECT (SELECT value FROM decision_ledger_meta WHERE key = 'layout'), "
    "(SELECT token FROM decision_ledger WHERE namespace = ? AND request_id = x'')"
)
HAS_TABLES = (
    "SELECT count(*) FROM sqlite_master WHERE type = 'table' "
    "AND name IN ('decision_ledger', 'decision_ledger_meta')"
)


def _genesis(namespace: str, value: str) -> str:
    """1 while the namespace's genesis row holds the value this ledger opened, else 0."""
    return (
        f"EXISTS (SELECT 1 FROM decision_ledger WHERE namespace = {namespace} "
        f"AND request_id = x'' AND token = {value})"
    )


# One statement per spend: the unique key decides the winner, no read-then-write. The
# token is NULL unless the genesis is the one we opened with, and SQLite checks NOT
# NULL before the conflict: a forgotten store raises IntegrityError, never a False.
# Parameters: namespace, request id, genesis, token, time.
SPEND = (
    "INSERT INTO decision_ledger (namespace, request_id, token, spent_at) "
    f"VALUES (?1, ?2, CASE WHEN {_genesis('?1', '?3')} THEN ?4 END, ?5) "
    "ON CONFLICT (namespace, request_id) DO NOTHING"
)
# C10 in one statement (one transaction): the same guarded insert, with the key's digest
# (?6); on a conflict the row is "updated" to itself only when it holds the same digest,
# so a row comes back exactly when this call recorded the id (our token) or the same key
# did earlier. No row: another key's or a plain spend's record.
SPEND_AS = (
    "INSERT INTO decision_ledger (namespace, request_id, token, spent_at, holder) "
    f"VALUES (?1, ?2, CASE WHEN {_genesis('?1', '?3')} THEN ?4 END, ?5, ?6) "
    "ON CONFLICT (namespace, request_id) DO UPDATE SET holder = excluded.holder "
    "WHERE decision_ledger.holder = excluded.holder "
    "RETURNING token"
)
# One row (spent?) only while the genesis is the one we opened with; no row: forgot.
# Parameters: namespace, request id, genesis (as for every read below).
IS_SPENT = (
    "SELECT EXISTS (SELECT 1 FROM decision_ledger WHERE namespace = ?1 AND request_id = ?2) "
    "FROM decision_ledger WHERE namespace = ?1 AND request_id = x'' AND token = ?3"
)
# (same store?, token, holder) after a spend or spend_as whose outcome is unknown.
READ_BACK = (
    f"SELECT {_genesis('?1', '?3')}, t.token, t.holder FROM (SELECT 1) "
    "LEFT JOIN decision_ledger AS t ON t.namespace = ?1 AND t.request_id = ?2"
)
# Parameters: namespace, genesis.
SAME_STORE = f"SELECT {_genesis('?1', '?2')}"

# Keyset pages, so a long scan never holds one read transaction open.
SCAN_PAGE = (
    "SELECT request_id FROM decision_ledger WHERE namespace = ? AND request_id > ? "
    "ORDER BY request_id LIMIT ?"
)
# The markers of one kind: a byte range of request_id (markers start with 0xFF).
MARKER_RANGE = (
    "SELECT request_id FROM decision_ledger WHERE namespace = ? AND request_id >= ? "
    "AND request_id < ? ORDER BY request_id"
)
# The next namespace after ``?``: one primary-key seek each, whatever a namespace holds
# (every namespace a ledger opened holds its genesis).
NEXT_NAMESPACE = "SELECT min(namespace) FROM decision_ledger WHERE namespace > ?"

BEGIN = "BEGIN"
BEGIN_WRITE = "BEGIN IMMEDIATE"
COMMIT = "COMMIT"
