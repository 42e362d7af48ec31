"""A store that admits a bounded number of open instances, as a server with a connection
limit does (PostgreSQL's ``max_connections``): one more open is refused."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from ledger_conformance import LedgerContext
from ledger_core import AsyncMemoryLedger, MemoryLedger
from ledger_core.errors import LedgerUnavailable
from ledger_core.memory import named_store

LIMIT = 12  # above what any one clause holds open at once, below one per store of a run
_open = 0
_lock = threading.Lock()


@contextmanager
def _admitted() -> Iterator[None]:
    global _open
    with _lock:
        if _open >= LIMIT:
            raise LedgerUnavailable(f"too many clients already ({LIMIT} open)")
        _open += 1
    try:
        yield
    finally:
        with _lock:
            _open -= 1


def factory(ctx: LedgerContext) -> Any:
    """A memory ledger per store label, counted while it is open."""
    store = named_store(f"bounded-{ctx.store}")
    if ctx.flavor == "async":
        return _async_ledger(store)
    return _sync_ledger(store)


@contextmanager
def _sync_ledger(store: Any) -> Iterator[MemoryLedger]:
    with _admitted():
        yield MemoryLedger(store)


@asynccontextmanager
async def _async_ledger(store: Any) -> AsyncIterator[AsyncMemoryLedger]:
    with _admitted():
        yield AsyncMemoryLedger(store)
