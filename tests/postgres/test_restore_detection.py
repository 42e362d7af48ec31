"""A restore is another store (issue 37): the genesis row's ``xmin`` is part of
``store_id`` and of every statement's guard, so rows written again (TRUNCATE + the COPY
of an earlier ``pg_dump --data-only``, in one transaction, or the genesis row re-inserted
as it was) fail every open instance closed and give new ones another ``store_id``. The
routine maintenance that keeps rows as they are (VACUUM FULL, VACUUM FREEZE, CLUSTER,
REINDEX) keeps both."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from psycopg import sql

from ledger_core.errors import UnsafeStoreConfig
from ledger_postgres import PostgresLedger
from tests.servers.postgres import PostgresServer

from .conftest import Opener, forgotten, host_pool_ledger


def _dump(admin: psycopg.Connection[Any], table: str) -> bytes:
    """What ``pg_dump --data-only -t TABLE`` carries: the table's rows, as COPY text."""
    out = bytearray()
    with admin.cursor().copy(sql.SQL("COPY {} TO STDOUT").format(sql.Identifier(table))) as copy:
        for chunk in copy:
            out += chunk
    return bytes(out)


def _restore(admin: psycopg.Connection[Any], table: str, dump: bytes) -> None:
    """TRUNCATE + COPY in one transaction: no moment without rows; the table's OID, the
    database's and the cluster's identifier stay."""
    with admin.transaction():
        admin.execute(sql.SQL("TRUNCATE {}").format(sql.Identifier(table)))
        with admin.cursor().copy(sql.SQL("COPY {} FROM STDIN").format(sql.Identifier(table))) as c:
            c.write(dump)


def _failed(ledger: Any) -> None:
    """Failed closed (for an id spent after the backup too), and it stays failed."""
    forgotten(ledger)
    with pytest.raises(UnsafeStoreConfig, match="reopen"):
        ledger.is_spent("spent-after")
    forgotten(ledger)


def test_a_data_only_restore_fails_open_instances_and_changes_store_id(
    open_pg: Opener, admin: psycopg.Connection[Any], table: str
) -> None:
    old = open_pg()
    assert old.spend("spent-before") is True
    dump = _dump(admin, table)
    assert old.spend("spent-after") is True
    before = old.store_id
    _restore(admin, table, dump)
    _failed(old)
    new = open_pg()
    assert new.store_id is not None
    assert before is not None
    assert new.store_id != before
    token = before.split(":")[4].split(".")[0]  # the genesis token is the backup's
    assert new.store_id.split(":")[4].split(".")[0] == token
    assert new.is_spent("spent-before") is True  # the backup's ids, under a new store_id


def test_the_genesis_row_written_again_as_it_was_is_another_store(
    open_pg: Opener, admin: psycopg.Connection[Any], table: str
) -> None:
    old = open_pg()
    assert old.spend("spent-after") is True
    name = sql.Identifier(table)
    with admin.transaction():
        admin.execute(
            sql.SQL(
                "CREATE TEMP TABLE g AS SELECT * FROM {} WHERE request_id = ''; "
                "DELETE FROM {} WHERE request_id = ''; INSERT INTO {} SELECT * FROM g; "
                "DROP TABLE g"
            ).format(name, name, name)
        )
    _failed(old)
    assert open_pg().store_id not in (None, old.store_id)


def test_a_restore_fails_a_ledger_on_a_host_pool(
    pg_server: PostgresServer, admin: psycopg.Connection[Any], table: str
) -> None:
    with host_pool_ledger(pg_server, table) as old:
        dump = _dump(admin, table)
        assert old.spend("spent-after") is True
        _restore(admin, table, dump)
        _failed(old)
        assert PostgresLedger.from_pool(old._pool, table=table).store_id != old.store_id


@pytest.mark.parametrize(
    "maintenance",
    [
        "VACUUM FULL {}",
        "VACUUM FREEZE {}",
        "VACUUM (FULL, FREEZE) {}",
        "CLUSTER {} USING {}",
        "REINDEX TABLE {}",
        "VACUUM {}",
    ],
)
def test_routine_maintenance_keeps_the_store_id(
    maintenance: str, open_pg: Opener, admin: psycopg.Connection[Any], table: str
) -> None:
    old = open_pg()
    assert old.spend("spent-before") is True
    admin.execute(
        sql.SQL(maintenance).format(sql.Identifier(table), sql.Identifier(f"{table}_pkey"))
    )
    assert old.spend("spent-before") is False  # still the same store: no failure
    assert old.is_spent("spent-before") is True
    assert old.spend("spent-after") is True
    assert open_pg().store_id == old.store_id
