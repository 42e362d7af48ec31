"""What ``pytest --pyargs ledger_conformance --ledger-url URL`` collects."""

from __future__ import annotations

from .suite import LedgerConformance


class TestLedgerConformance(LedgerConformance):
    """The suite against the ledger named by --ledger-url or --ledger-factory."""
