"""A PostgreSQL table restored from a data-only dump (``TRUNCATE`` and the earlier rows
inserted again, in one transaction), and ``reidentify`` (C6). The table's OID, the
database and the system identifier stay, so the procedure is what tells the store (a
store that detects it as well fails closed the same way)."""

from __future__ import annotations

from tests.postgres.test_conformance_postgres import Restore
from tests.restoring import restored_then_reidentified
from tests.servers.postgres import PostgresServer


def test_a_truncated_and_refilled_table_fails_closed_once_reidentified(
    pg_server: PostgresServer, table: str
) -> None:
    restore = Restore(pg_server, table)

    def whole_table(phase: str, namespace: str) -> None:
        restore(phase)  # every namespace: TRUNCATE, then COPY

    restored_then_reidentified(pg_server.url, "restored", whole_table, table=table)


def test_one_namespace_restored_fails_closed_once_reidentified(
    pg_server: PostgresServer, table: str
) -> None:
    restored_then_reidentified(pg_server.url, "one", Restore(pg_server, table), table=table)
