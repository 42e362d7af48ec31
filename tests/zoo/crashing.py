"""Stores that crash the interpreter (as a C extension with a bad pointer would, or an
LMDB store with its lock off aborts) in one place each: opening, ``describe()``, a session
fixture, a clause test; and one whose open hangs. ``decision-ledger check`` must report
each, never die or hang with it.

Each is an in-process memory ledger (no server), crashed by ``os.abort()`` (SIGABRT) or a
read of address 0 (SIGSEGV).
"""

from __future__ import annotations

import ctypes
import os
import time
from typing import Any

from ledger_conformance import LedgerContext
from ledger_core import MemoryStore
from ledger_core.memory import AsyncMemoryLedger, MemoryLedger

_STORES: dict[str, MemoryStore] = {}


def _memory(ctx: LedgerContext, cls: type[Any] | None = None) -> Any:
    store = _STORES.setdefault(ctx.store, MemoryStore())
    if cls is not None:
        return cls(store)
    return AsyncMemoryLedger(store) if ctx.flavor == "async" else MemoryLedger(store)


def crashes_opening(ctx: LedgerContext) -> Any:
    """The factory call itself aborts (an open that trips over its own lock file)."""
    os.abort()


def hangs_opening(ctx: LedgerContext) -> Any:
    """The factory call never returns (a lock that is never released)."""
    time.sleep(3600)


class _DescribeCrashes(MemoryLedger):
    def describe(self) -> Any:
        ctypes.string_at(0)  # reads address 0: SIGSEGV
        return super().describe()


def crashes_describing(ctx: LedgerContext) -> Any:
    """Opens, then segfaults when asked what it is (``describe()``)."""
    return _memory(ctx, _DescribeCrashes)


class _AbortsOnNul(MemoryLedger):
    def spend(self, request_id: str) -> bool:
        if isinstance(request_id, str) and "\x00" in request_id:
            os.abort()
        return super().spend(request_id)


class _AsyncAbortsOnNul(AsyncMemoryLedger):
    async def spend(self, request_id: str) -> bool:
        if isinstance(request_id, str) and "\x00" in request_id:
            os.abort()
        return await super().spend(request_id)


def crashes_in_a_clause(ctx: LedgerContext) -> Any:
    """Aborts on a spend of an id holding a NUL: only C8's edge ids have one."""
    return _memory(ctx, _AsyncAbortsOnNul if ctx.flavor == "async" else _AbortsOnNul)


def correct(ctx: LedgerContext) -> Any:
    """The control: the same memory ledger, never crashing."""
    return _memory(ctx)


def __getattr__(name: str) -> Any:
    """``crashes_in_a_session_fixture``: a factory that loads (the check opens it first)
    but whose loading inside a pytest test's setup aborts: the suite loads the factory in
    its session fixture ``ledger_option_factory``, set up for the first clause test."""
    if name != "crashes_in_a_session_fixture":
        raise AttributeError(name)
    if "TestLedgerConformance::" in os.environ.get("PYTEST_CURRENT_TEST", ""):
        os.abort()  # in a clause test's setup, not in the check's own opening
    return correct
