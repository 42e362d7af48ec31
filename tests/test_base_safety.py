"""The base classes' safety net: a backend's unmapped exception is never a raw escape.

Before: ``LedgerBase.spend`` let a ``RuntimeError`` from ``_spend`` through, so a host
catching ``LedgerError`` (as the contract tells it to) crashed instead of failing closed.
"""

from __future__ import annotations

import asyncio

import pytest

from ledger_core import AmbiguousSpend, AsyncLedgerBase, LedgerBase, LedgerUnavailable
from ledger_core.ids import MarkerKind, marker_id


class Crashing(LedgerBase):
    _cleared = True  # no migration check: its marker read would fail first (fail closed)

    def _spend(self, request_id: bytes) -> bool:
        raise RuntimeError("driver bug")

    def _is_spent(self, request_id: bytes) -> bool:
        raise TypeError("driver bug")


class AsyncCrashing(AsyncLedgerBase):
    _cleared = True

    async def _spend(self, request_id: bytes) -> bool:
        raise RuntimeError("driver bug")

    async def _is_spent(self, request_id: bytes) -> bool:
        raise TypeError("driver bug")


def test_sync_unmapped_exceptions_become_ledger_errors() -> None:
    ledger = Crashing()
    marker = marker_id(MarkerKind.CLOSED_PROVEN, "x")
    with pytest.raises(AmbiguousSpend, match="may have landed") as caught:
        ledger.spend("x")
    assert isinstance(caught.value.__cause__, RuntimeError)
    with pytest.raises(AmbiguousSpend):
        ledger.spend_marker(marker)
    with pytest.raises(LedgerUnavailable) as read_error:
        ledger.is_spent("x")
    assert not isinstance(read_error.value, AmbiguousSpend)
    assert isinstance(read_error.value.__cause__, TypeError)
    with pytest.raises(LedgerUnavailable):
        ledger.is_marker_spent(marker)


def test_async_unmapped_exceptions_become_ledger_errors() -> None:
    async def main() -> None:
        ledger = AsyncCrashing()
        with pytest.raises(AmbiguousSpend) as caught:
            await ledger.spend("x")
        assert isinstance(caught.value.__cause__, RuntimeError)
        with pytest.raises(LedgerUnavailable) as read_error:
            await ledger.is_spent("x")
        assert isinstance(read_error.value.__cause__, TypeError)
        with pytest.raises(AmbiguousSpend):
            await ledger.spend_marker(marker_id(MarkerKind.LINEAGE, "y"))

    asyncio.run(main())


def test_cancellation_is_not_swallowed() -> None:
    class Cancelled(AsyncLedgerBase):
        _cleared = True  # no reads to run the migration check with

        async def _spend(self, request_id: bytes) -> bool:
            raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(Cancelled().spend("x"))
