"""Ledgers with scripted answers, for driving the host rules through every branch.

These stand in for a ledger's *answers*, not for a store: stores are tested for real.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ledger_core import MemoryLedger

Answer = Callable[[str], object]


class Scripted:
    """A sync ledger over a MemoryLedger whose answers can be overridden per method."""

    def __init__(
        self,
        *,
        store_id: str | None = "store-A",
        spend: Answer | None = None,
        is_spent: Answer | None = None,
        has_is_spent: bool = True,
    ) -> None:
        self.inner = MemoryLedger()
        self.store_id = store_id
        self._spend = spend or self.inner.spend
        self._is_spent = is_spent or self.inner.is_spent
        self.calls: list[tuple[str, str]] = []
        if not has_is_spent:
            self.is_spent = None  # type: ignore[assignment]

    def spend(self, request_id: str) -> Any:
        self.calls.append(("spend", request_id))
        return self._spend(request_id)

    def is_spent(self, request_id: str) -> Any:
        self.calls.append(("is_spent", request_id))
        return self._is_spent(request_id)


class AsyncScripted(Scripted):
    """The same answers, returned from coroutines."""

    async def spend(self, request_id: str) -> Any:
        return Scripted.spend(self, request_id)

    async def is_spent(self, request_id: str) -> Any:
        return Scripted.is_spent(self, request_id)


def raises(exc: BaseException) -> Answer:
    def answer(_: str) -> object:
        raise exc

    return answer


def constant(value: object) -> Answer:
    return lambda _: value
