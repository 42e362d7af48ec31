"""Ledgers with scripted answers, for driving the host rules through every branch.

These stand in for a ledger's *answers*, not for a store: stores are tested for real.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ledger_core import MemoryLedger

Answer = Callable[[Any], object]


class Scripted:
    """A sync ledger over a MemoryLedger whose answers can be overridden per method."""

    def __init__(
        self,
        *,
        store_id: str | None = "store-A",
        spend: Answer | None = None,
        is_spent: Answer | None = None,
        has_is_spent: bool = True,
        spend_marker: Answer | None = None,
        has_markers: bool = True,
    ) -> None:
        self.inner = MemoryLedger()
        self.store_id = store_id
        self._spend = spend or self.inner.spend
        self._is_spent = is_spent or self.inner.is_spent
        self._spend_marker = spend_marker or self.inner.spend_marker
        self.calls: list[tuple[str, str | bytes]] = []
        if not has_is_spent:
            self.is_spent = None  # type: ignore[assignment]
        if not has_markers:
            self.spend_marker = None  # type: ignore[assignment]
            self.is_marker_spent = None  # type: ignore[assignment]

    def spend(self, request_id: str) -> Any:
        self.calls.append(("spend", request_id))
        return self._spend(request_id)

    def is_spent(self, request_id: str) -> Any:
        self.calls.append(("is_spent", request_id))
        return self._is_spent(request_id)

    def spend_marker(self, marker: bytes) -> Any:
        self.calls.append(("spend_marker", marker))
        return self._spend_marker(marker)

    def is_marker_spent(self, marker: bytes) -> Any:
        self.calls.append(("is_marker_spent", marker))
        return self.inner.is_marker_spent(marker)


class AsyncScripted(Scripted):
    """The same answers, returned from coroutines."""

    async def spend(self, request_id: str) -> Any:
        return Scripted.spend(self, request_id)

    async def is_spent(self, request_id: str) -> Any:
        return Scripted.is_spent(self, request_id)

    async def spend_marker(self, marker: bytes) -> Any:
        return Scripted.spend_marker(self, marker)

    async def is_marker_spent(self, marker: bytes) -> Any:
        return Scripted.is_marker_spent(self, marker)


def raises(exc: BaseException) -> Answer:
    def answer(_: str) -> object:
        raise exc

    return answer


def constant(value: object) -> Answer:
    return lambda _: value
