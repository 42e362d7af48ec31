"""One namespace forgets: its genesis lives with its records, so every open instance
of that namespace fails closed at its next operation, and a new one gets a new
``store_id``. Tables made before namespaces had their own genesis are upgraded by
``setup`` or an open with ``create=true`` (keeping each namespace's ``store_id``), and
refused with the fix under ``create=false``."""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
import pytest
from psycopg import sql

from ledger_core.errors import LedgerError, UnsafeStoreConfig
from ledger_postgres import setup
from tests.servers.postgres import PostgresServer

from .conftest import Opener


def _delete_namespace(admin: psycopg.Connection[Any], table: str, namespace: str) -> None:
    admin.execute(
        sql.SQL("DELETE FROM {} WHERE namespace = %s").format(sql.Identifier(table)),
        (namespace.encode(),),
    )


def _failed(ledger: Any) -> None:
    for _ in range(2):  # and it stays failed
        with pytest.raises(UnsafeStoreConfig, match="reopen"):
            ledger.spend("spent-before")
        with pytest.raises(UnsafeStoreConfig, match="reopen"):
            ledger.is_spent("spent-before")
        with pytest.raises(UnsafeStoreConfig, match="reopen"):
            ledger.run(ledger.ledger.spend_many(["spent-before", "never-seen"]))
        with pytest.raises(UnsafeStoreConfig, match="reopen"):
            ledger.run(ledger.ledger.is_spent_many(["spent-before"]))
        with pytest.raises(UnsafeStoreConfig, match="reopen"):
            ledger.collect(ledger.ledger.spent_ids())


def test_deleting_one_namespace_fails_its_open_instances(
    open_pg: Opener, admin: psycopg.Connection[Any], table: str
) -> None:
    old, other = open_pg(namespace="prod"), open_pg(namespace="other")
    assert old.spend("spent-before") is True
    assert other.spend("kept") is True
    before = old.store_id
    _delete_namespace(admin, table, "prod")  # every row of the namespace, genesis included
    _failed(old)
    new = open_pg(namespace="prod")
    assert new.store_id not in (None, before)
    assert new.spend("spent-before") is True  # a new store: the host asks again (H5)
    _failed(old)  # even now that the namespace has a genesis again
    assert other.spend("kept") is False  # the other namespace never noticed
    assert other.is_spent("kept") is True


def test_deleting_the_namespace_genesis_alone_fails_closed(
    open_pg: Opener, admin: psycopg.Connection[Any], table: str
) -> None:
    """The namespace's genesis row alone deleted: the next read fails closed too."""
    ledger = open_pg(namespace="n")
    assert ledger.spend("a") is True
    admin.execute(
        sql.SQL("DELETE FROM {} WHERE namespace = %s AND request_id = ''").format(
            sql.Identifier(table)
        ),
        (b"n",),
    )
    with pytest.raises(UnsafeStoreConfig, match="reopen"):
        ledger.is_spent("a")


def test_spend_as_and_markers_prove_the_namespace_genesis(
    open_pg: Opener, admin: psycopg.Connection[Any], table: str
) -> None:
    ledger = open_pg(namespace="ns-as")
    key = "k" * 32
    assert ledger.run(ledger.ledger.spend_as("x", key)) is True
    _delete_namespace(admin, table, "ns-as")
    with pytest.raises(UnsafeStoreConfig, match="reopen"):
        ledger.run(ledger.ledger.spend_as("x", key))
    with pytest.raises(UnsafeStoreConfig, match="reopen"):
        ledger.run(ledger.ledger.lineage())


def _old_table(admin: psycopg.Connection[Any], table: str, namespace: bytes) -> str:
    """A table as an older version made it: one genesis row for the whole table (0xFF),
    records under ``namespace``; returns the old store_id's genesis UUID."""
    token = uuid.uuid4().bytes
    name = sql.Identifier(table)
    admin.execute(
        sql.SQL(
            "CREATE TABLE {} (namespace bytea NOT NULL, request_id bytea NOT NULL, "
            "token bytea NOT NULL, spent_at timestamptz NOT NULL DEFAULT now(), "
            "attempt_digest bytea, PRIMARY KEY (namespace, request_id))"
        ).format(name)
    )
    admin.execute(
        sql.SQL(
            "INSERT INTO {} (namespace, request_id, token) VALUES (%s, %s, %s), (%s, %s, %s)"
        ).format(name),
        (b"\xff", b"store-identity", token, namespace, b"old-id", b"t" * 16),
    )
    return str(uuid.UUID(bytes=token))


def test_an_older_table_is_refused_under_create_false_with_the_fix(
    open_pg: Opener, admin: psycopg.Connection[Any], table: str, pg_server: PostgresServer
) -> None:
    genesis = _old_table(admin, table, b"prod")
    with pytest.raises(LedgerError, match="decision-ledger setup"):
        open_pg(namespace="prod", create="false")
    with pytest.raises(LedgerError, match="--namespace fresh"):  # a namespace never made
        open_pg(namespace="fresh", create="false")
    fresh = open_pg(namespace="fresh")  # made now, with a genesis of its own
    assert fresh.store_id is not None
    assert genesis not in fresh.store_id
    info = setup(pg_server.url, table=table, namespace="prod")
    assert info.store_id is not None
    assert genesis in info.store_id  # the namespace keeps its store_id
    ledger = open_pg(namespace="prod", create="false")
    assert ledger.store_id == info.store_id
    assert ledger.spend("old-id") is False


def test_an_older_table_is_upgraded_by_an_open_with_create(
    open_pg: Opener, admin: psycopg.Connection[Any], table: str
) -> None:
    genesis = _old_table(admin, table, b"prod")
    ledger = open_pg(namespace="prod")
    assert ledger.store_id is not None
    assert genesis in ledger.store_id
    assert ledger.is_spent("old-id") is True
    _delete_namespace(admin, table, "prod")
    with pytest.raises(UnsafeStoreConfig, match="reopen"):
        ledger.is_spent("old-id")
    again = open_pg(namespace="prod")
    assert again.store_id not in (None, ledger.store_id)  # emptied: never the old T again
