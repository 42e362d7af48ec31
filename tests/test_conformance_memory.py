"""The suite against MemoryLedger, through the base class (one store per label)."""

from __future__ import annotations

from typing import Any

import pytest
from ledger_conformance import LedgerConformance, LedgerContext

from ledger_core import AsyncMemoryLedger, MemoryLedger
from ledger_core.memory import named_store


def memory_factory(ctx: LedgerContext) -> Any:
    store = named_store(f"conformance-{ctx.store}")
    if ctx.flavor == "async":
        return AsyncMemoryLedger(store)
    return MemoryLedger(store)


class TestMemoryLedger(LedgerConformance):
    @pytest.fixture
    def ledger_factory(self) -> Any:
        return memory_factory
