"""A ledger with only ``spend``, ``is_spent`` and ``store_id`` (no close, no describe, no
async variant) passes every clause it can be asked: the suite needs nothing more."""

from __future__ import annotations

import atexit
import functools
from pathlib import Path
from typing import Any

import pytest

from ledger_conformance import LedgerConformance, LedgerContext, offers_create
from ledger_sqlite import SQLiteLedger


class MinimalLedger:
    """Exactly the protocol: the SQLite ledger seen through three names."""

    def __init__(self, inner: SQLiteLedger) -> None:
        self._inner = inner
        self.store_id = inner.store_id

    def spend(self, request_id: str) -> bool:
        return self._inner.spend(request_id)

    def is_spent(self, request_id: str) -> bool:
        return self._inner.is_spent(request_id)


@pytest.fixture(scope="session")
def minimal_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("minimal")


def open_minimal(path: Path, ctx: LedgerContext) -> MinimalLedger:
    """Module-level, so the spawned-interpreter axes reach this ledger too."""
    inner = SQLiteLedger(path, namespace=ctx.store, create=ctx.create is not False)
    atexit.register(inner.close)  # the ledger has no close(): the suite cannot
    return MinimalLedger(inner)


class TestMinimalLedger(LedgerConformance):
    @pytest.fixture
    def ledger_factory(self, minimal_dir: Path) -> Any:
        return offers_create(functools.partial(open_minimal, minimal_dir / "ledger.db"))
