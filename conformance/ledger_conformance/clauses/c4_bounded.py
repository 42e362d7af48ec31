"""C4, never a hang: under a black hole or a trickling reply, every one of many
concurrent callers raises (or answers) within the call bound.

Callers that wait on one another (one lock around a network call) each wait out the
others' timeouts, and a read timeout that restarts with every byte never trips on a
trickle. The bound: ``--ledger-call-bound`` when given, else 10 s.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import threading
import time
from typing import Any

import pytest

from ledger_core.errors import LedgerError

from ..declare import ROUTABLE
from ..faults import ProxyRouter, Toxic
from ..harness import Handle, Ledgers, error_text
from .c45_faults import C4, _open_routed
from .common import expect_bool

CALL_BOUND = 10.0  # seconds: the default bound on one call under a fault
CALL_BOUND_OPTION = "--ledger-call-bound"
CALLERS = 8  # per variant, released together
TRICKLE_GAP = 0.5  # seconds between the bytes of a trickled reply


def _timed(handle: Handle, method: str, request_id: str, go: threading.Event) -> float:
    """Seconds ``method`` took, once released; a raise other than a LedgerError fails."""
    go.wait()
    began = time.monotonic()
    with contextlib.suppress(LedgerError):  # failing closed is what a fault should give
        handle.call(method, request_id)
    return time.monotonic() - began


def _raised(future: concurrent.futures.Future[float]) -> bool:
    return future.done() and future.exception() is not None


def _error(future: concurrent.futures.Future[float]) -> str:
    exc = future.exception()
    return error_text(exc) if exc is not None else ""


class C4Bounded:
    @pytest.fixture
    def ledger_call_bound(self, pytestconfig: pytest.Config) -> float:
        """Seconds one call may take under a black hole or a trickling reply: a URL run
        with a longer ``timeout`` than the default says so with ``--ledger-call-bound``."""
        given: float | None = pytestconfig.getoption(CALL_BOUND_OPTION, None)
        return CALL_BOUND if given is None else given

    @C4(ROUTABLE)
    @pytest.mark.parametrize("toxic", ["blackhole", "trickle"])
    def test_C4_bounded_calls(self, ledgers: Ledgers, toxic: str, ledger_call_bound: float) -> None:
        """8 callers per variant, spends and reads released together under the fault:
        the slowest must be done within the bound (the network heals only after it)."""
        with ProxyRouter() as router:
            handles = _open_routed(ledgers, router)
            taken = ledgers.ids(1, "taken")[0]
            assert expect_bool(handles[0].call("spend", taken), "spend") is True
            warm = [  # as many connections per variant as callers, opened before the fault
                ledgers.executor.submit(
                    handle.call, "is_spent" if handle.has_is_spent else "spend", taken
                )
                for handle in handles
                for _ in range(CALLERS)
            ]
            for future in concurrent.futures.as_completed(warm, timeout=ledgers.profile.settle):
                future.result()
            router.set(Toxic(toxic), latency=TRICKLE_GAP if toxic == "trickle" else 0.0)
            go = threading.Event()
            calls: list[tuple[str, concurrent.futures.Future[float]]] = []
            pool = ledgers.executor
            for handle in handles:
                fresh = ledgers.ids(CALLERS, f"fresh-{handle.flavor}")
                for n in range(CALLERS):
                    method = "is_spent" if n % 2 and handle.has_is_spent else "spend"
                    request_id = taken if method == "is_spent" else fresh[n]
                    what = f"{handle.flavor} {method}"
                    calls.append((what, pool.submit(_timed, handle, method, request_id, go)))
            go.set()
            futures: Any = [future for _, future in calls]
            concurrent.futures.wait(futures, timeout=ledger_call_bound + 1.0)
            router.heal()
            router.reset_connections()
            concurrent.futures.wait(futures, timeout=ledgers.profile.settle)
        odd = [f"{what}: {_error(f)}" for what, f in calls if _raised(f)]
        assert not odd, f"under {toxic}, a call raised a non-LedgerError: {odd[0]}"
        slow = [
            f"{what} took {future.result():.1f} s" if future.done() else f"{what} still running"
            for what, future in calls
            if not future.done() or future.result() > ledger_call_bound
        ]
        assert not slow, (
            f"under {toxic}, {len(slow)} of {len(calls)} concurrent call(s) were not done "
            f"within the {ledger_call_bound:g} s bound: " + "; ".join(slow)
        )
