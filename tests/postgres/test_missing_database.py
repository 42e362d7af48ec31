"""A URL naming a database that does not exist says how to create it.

Before: libpq's 'FATAL: database "x" does not exist' alone, with neither ``createdb``
nor the docs: a first set-up's most common stop."""

from __future__ import annotations

import pytest

from ledger_core import LedgerUnavailable, open_ledger
from ledger_core.cli import main
from tests.servers.postgres import PostgresServer


def test_a_missing_database_names_createdb_and_the_docs(
    pg_server: PostgresServer, capsys: pytest.CaptureFixture[str]
) -> None:
    url = pg_server.url.rsplit("/", 1)[0] + "/no_such_database"
    with pytest.raises(LedgerUnavailable, match="createdb NAME") as caught:
        open_ledger(url, create=False)
    assert "docs/postgres.md" in str(caught.value)
    for command in ("setup", "is-spent"):
        assert main([command, url, *(["a"] if command == "is-spent" else [])]) == 3
        err = capsys.readouterr().err
        assert 'database "no_such_database" does not exist' in err
        assert "createdb NAME" in err
