"""The suite against the SQLite ledger, through the base class: one file per store label."""

from __future__ import annotations

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
