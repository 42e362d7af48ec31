"""Run one test body against the sync and the async ledger of any backend (C9).

``Flavored`` gives an async ledger the sync ledger's face by driving it on an event
loop of its own, so each test is written once and asserted on both variants.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ledger_core import open_async_ledger, open_ledger
from ledger_core.protocol import LedgerInfo


class Flavored:
    def __init__(self, flavor: str, url: str, **options: Any) -> None:
        self.flavor = flavor
        self.loop: asyncio.AbstractEventLoop | None = None
        if flavor == "sync":
            self.ledger: Any = open_ledger(url, **options)
        else:
            self.loop = asyncio.new_event_loop()
            try:
                self.ledger = self.run(open_async_ledger(url, **options))
            except BaseException:
                self.loop.close()
                raise

    def run(self, value: Any) -> Any:
        """Await ``value`` on this ledger's loop (async), or pass it through (sync)."""
        if self.loop is None:
            return value
        return self.loop.run_until_complete(value)

    def spend(self, request_id: str) -> bool:
        result: bool = self.run(self.ledger.spend(request_id))
        return result

    def is_spent(self, request_id: str) -> bool:
        result: bool = self.run(self.ledger.is_spent(request_id))
        return result

    def spent_ids(self, **options: Any) -> list[str]:
        """The whole listing, collected (sync iterator or async iterator alike)."""
        return self.collect(self.ledger.spent_ids(**options))

    def collect(self, listing: Any) -> list[str]:
        """A whole listing (``spent_ids()``, ``namespaces()``): a sync iterator, or an
        async one driven on this ledger's loop."""
        if self.loop is None:
            return list(listing)

        async def collect() -> list[str]:
            return [item async for item in listing]

        result: list[str] = self.run(collect())
        return result

    @property
    def store_id(self) -> str | None:
        value: str | None = self.ledger.store_id
        return value

    def describe(self) -> LedgerInfo:
        info: LedgerInfo = self.ledger.describe()
        return info

    def close(self) -> None:
        """Close the ledger; the loop stays, so a test may still call the closed ledger."""
        if self.loop is None:
            self.ledger.close()
        else:
            self.run(self.ledger.aclose())

    def dispose(self) -> None:
        """Close the ledger, then its loop."""
        try:
            self.close()
        finally:
            if self.loop is not None:
                self.loop.close()

    def __enter__(self) -> Flavored:
        return self

    def __exit__(self, *exc: object) -> None:
        self.dispose()
