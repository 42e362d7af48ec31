"""A store whose restart hook returns before it serves again, like a ``redis-server``
restart that returns while the server still answers ``LOADING``: every open and call
raises ``LedgerUnavailable`` for ``LEDGER_ZOO_LOADING_SECONDS`` (default 1) after the hook.

The ledger is correct (it fails closed while the store loads); the hook is what is wrong.
Before the suite waited for the store to serve, C2 failed on it with the loading error.
"""

from __future__ import annotations

import os
import time
from typing import Any

from ledger_conformance import LedgerContext
from ledger_core import MemoryStore
from ledger_core.errors import LedgerUnavailable
from ledger_core.memory import AsyncMemoryLedger, MemoryLedger

ENV = "LEDGER_ZOO_LOADING_SECONDS"
_STORES: dict[str, MemoryStore] = {}
_loading_until = [0.0]  # monotonic time the store serves again


def _serving() -> None:
    if time.monotonic() < _loading_until[0]:
        raise LedgerUnavailable("LOADING the store is loading its dataset in memory")


class _Loading(MemoryLedger):
    def __init__(self, store: MemoryStore) -> None:
        _serving()
        super().__init__(store)

    def _spend(self, request_id: bytes) -> bool:
        _serving()
        return super()._spend(request_id)

    def _is_spent(self, request_id: bytes) -> bool:
        _serving()
        return super()._is_spent(request_id)


class _AsyncLoading(AsyncMemoryLedger):
    def __init__(self, store: MemoryStore) -> None:
        _serving()
        super().__init__(store)
        self._sync = _Loading(store)


def restart_returns_early() -> None:
    """The restart hook: the store is back, but loads for a while before it serves."""
    _loading_until[0] = time.monotonic() + float(os.environ.get(ENV, "1"))


def loads_after_restart(ctx: LedgerContext) -> Any:
    store = _STORES.setdefault(ctx.store, MemoryStore())
    return _AsyncLoading(store) if ctx.flavor == "async" else _Loading(store)


loads_after_restart.ledger_restart = restart_returns_early  # type: ignore[attr-defined]
