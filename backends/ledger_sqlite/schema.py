"""The SQLite ledger's schema and statements: the store's rules, in one place.

Every spend and every read proves, in the same statement (one transaction), that the
identity uuid this ledger opened with is still in the file. A store that forgot
(``DELETE FROM``, a dropped and re-created table, a file replaced by another) fails
that proof, and the ledger raises instead of answering from a store it never knew.
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
        PRIMARY KEY (namespace, request_id)
    ) WITHOUT ROWID""",
)

# The identity is born inside the file, once, by whichever opener gets there first.
CREATE_IDENTITY = (
    "INSERT INTO decision_ledger_meta (key, value) VALUES ('store_uuid', ?) "
    "ON CONFLICT (key) DO NOTHING"
)
READ_IDENTITY = "SELECT value FROM decision_ledger_meta WHERE key = 'store_uuid'"
HAS_TABLES = (
    "SELECT count(*) FROM sqlite_master WHERE type = 'table' "
    "AND name IN ('decision_ledger', 'decision_ledger_meta')"
)
_SAME_STORE = f"({READ_IDENTITY}) = ?"

# One statement per spend: the unique key decides the winner, no read-then-write. The
# token is NULL unless the identity is the one we opened with, and SQLite checks NOT
# NULL before the conflict: a forgotten store raises IntegrityError, never a False.
SPEND = (
    "INSERT INTO decision_ledger (namespace, request_id, token, spent_at) "
    f"VALUES (?, ?, CASE WHEN {_SAME_STORE} THEN ? END, ?) "
    "ON CONFLICT (namespace, request_id) DO NOTHING"
)
# One row (spent?) only while the identity is the one we opened with; no row: forgot.
# (Cheaper than two scalar subqueries: +0.4 us per read over the bare SELECT.)
IS_SPENT = (
    "SELECT EXISTS (SELECT 1 FROM decision_ledger WHERE namespace = ? AND request_id = ?) "
    "FROM decision_ledger_meta WHERE key = 'store_uuid' AND value = ?"
)
# (same store?, our token or NULL) after a spend whose outcome is unknown.
READ_TOKEN = (
    f"SELECT {_SAME_STORE}, "
    "(SELECT token FROM decision_ledger WHERE namespace = ? AND request_id = ?)"
)
SAME_STORE = f"SELECT {_SAME_STORE}"

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
