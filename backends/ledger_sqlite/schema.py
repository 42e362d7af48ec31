"""The SQLite ledger's schema and statements: the store's rules, in one place."""

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

# One statement per spend: the unique key decides the winner, no read-then-write.
SPEND = (
    "INSERT INTO decision_ledger (namespace, request_id, token, spent_at) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (namespace, request_id) DO NOTHING"
)
IS_SPENT = "SELECT 1 FROM decision_ledger WHERE namespace = ? AND request_id = ?"
READ_TOKEN = "SELECT token FROM decision_ledger WHERE namespace = ? AND request_id = ?"

# Keyset pages, so a long scan never holds one read transaction open.
SCAN_PAGE = (
    "SELECT request_id FROM decision_ledger WHERE namespace = ? AND request_id > ? "
    "ORDER BY request_id LIMIT ?"
)
