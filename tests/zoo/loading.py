"""A store whose restart hook returns before it serves again, like a ``redis-server``
restart that returns while the server still answers ``LOADING``: after the hook, the next
``LEDGER_ZOO_LOADING_CALLS`` (default 25) opens and calls raise ``LedgerUnavailable``.
Counted, not timed, so a loaded machine cannot make it serve before anyone asked.

The ledger is correct (it fails closed while the store loads); the hook is what is wrong.
Before the suite waited for the store to serve, C2 failed on it with the loading error.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from ledger_conformance import LedgerContext
from ledger_core import MemoryStore
from ledger_core.errors import LedgerUnavailable
from ledger_core.memory import AsyncMemoryLedger, MemoryLedger

ENV = "LEDGER_ZOO_LOADING_CALLS"
_STORES: dict[str, MemoryStore] = {}
_refusals = [0]  # opens and calls still refused since the last restart
_lock = threading.Lock()


def _serving() -> None:
    with _lock:
        if _refusals[0] <= 0:
            return
        _refusals[0] -= 1
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
    with _lock:
        _refusals[0] = int(os.environ.get(ENV, "25"))


def loads_after_restart(ctx: LedgerContext) -> Any:
    store = _STORES.setdefault(ctx.store, MemoryStore())
    return _AsyncLoading(store) if ctx.flavor == "async" else _Loading(store)


loads_after_restart.ledger_restart = restart_returns_early  # type: ignore[attr-defined]
