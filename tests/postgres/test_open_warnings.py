"""No warning from opening a PostgreSQL ledger, sync or async."""

from __future__ import annotations

from tests.quiet_open import NONE, warnings_on_open
from tests.servers.postgres import PostgresServer


def test_opening_warns_of_nothing(pg_server: PostgresServer, table: str) -> None:
    assert warnings_on_open(pg_server.url, table=table) == NONE
