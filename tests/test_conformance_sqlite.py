"""The suite against the SQLite ledger, through the base class: one file per store label."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ledger_conformance import LedgerConformance, LedgerContext
from ledger_sqlite import AsyncSQLiteLedger, SQLiteLedger


@pytest.fixture(scope="session")
def sqlite_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Session-scoped: equal labels must reach the same file for the whole run (C2).
    return tmp_path_factory.mktemp("sqlite-conformance")


class TestSQLiteLedger(LedgerConformance):
    @pytest.fixture
    def ledger_factory(self, sqlite_dir: Path) -> Any:
        def factory(ctx: LedgerContext) -> Any:
            path = sqlite_dir / "ledger.db"
            namespace = ctx.store
            if ctx.flavor == "async":
                return AsyncSQLiteLedger.open(path, namespace=namespace)
            return SQLiteLedger(path, namespace=namespace)

        return factory

    @pytest.fixture
    def ledger_forget(self, sqlite_dir: Path) -> Callable[[], object] | None:
        """The suite's forget hook: another process empties both tables of the file."""

        def forget() -> None:
            other = sqlite3.connect(sqlite_dir / "ledger.db", isolation_level=None)
            try:
                other.execute("DELETE FROM decision_ledger")
                other.execute("DELETE FROM decision_ledger_meta")
            finally:
                other.close()

        return forget
