"""PostgreSQL's ``remove_scratch`` hook: one DELETE of a bytea range; the table's
genesis row and every other namespace stay; a missing table is never created."""

from __future__ import annotations

import importlib
import subprocess
import sys
from typing import Any

import psycopg
import pytest

from ledger_core.errors import LedgerUnavailable
from tests.scratch_removal import exercise, new_prefix, refuses, remove
from tests.servers.postgres import PostgresServer


def _url(server: PostgresServer, table: str) -> str:
    joiner = "&" if "?" in server.url else "?"
    return f"{server.url}{joiner}table={table}"


def test_removes_exactly_the_scratch_namespaces(pg_server: PostgresServer, table: str) -> None:
    exercise(_url(pg_server, table))


def test_refuses_any_other_prefix(pg_server: PostgresServer, table: str) -> None:
    refuses(_url(pg_server, table))


def test_never_creates_the_table(
    pg_server: PostgresServer, table: str, admin: psycopg.Connection[Any]
) -> None:
    with pytest.raises(LedgerUnavailable, match="does not exist and create=false"):
        remove(_url(pg_server, table), new_prefix())
    found = admin.execute("SELECT to_regclass(%s)", (table,)).fetchone()
    assert found == (None,)


# Opening, spending, reading, listing and closing, sync and async; then what was loaded.
_USE_BOTH_FLAVORS = """
import asyncio, sys
from ledger_core import open_async_ledger, open_ledger
from ledger_postgres import BACKEND
with open_ledger(sys.argv[1]) as ledger:
    ledger.spend("a"), ledger.spend_many(["b"]), ledger.is_spent("a"), ledger.describe()
    list(ledger.spent_ids())
async def main():
    ledger = await open_async_ledger(sys.argv[1])
    await ledger.spend("c"), await ledger.is_spent("c"), await ledger.aclose()
asyncio.run(main())
print("ledger_postgres.testing" in sys.modules, BACKEND.testing)
"""


def test_a_ledger_never_loads_the_testing_module(pg_server: PostgresServer, table: str) -> None:
    """The hooks are named by reference only: a ledger's use leaves them unloaded."""
    argv = [sys.executable, "-c", _USE_BOTH_FLAVORS, _url(pg_server, table)]
    loaded, reference = subprocess.check_output(argv, text=True, timeout=120).split()
    assert loaded == "False"
    module, _, name = reference.partition(":")
    hooks = getattr(importlib.import_module(module), name)
    assert callable(hooks.reroute)
    assert callable(hooks.remove_scratch)
