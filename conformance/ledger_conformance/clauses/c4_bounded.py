"""C4, never a hang: under a black hole or a trickling reply, every one of many
concurrent callers raises (or answers) within the call bound; so does a call on a ledger
that was closed, and what it answers is the store's truth.

Callers that wait on one another (one lock around a network call) each wait out the
others' timeouts, and a read timeout that restarts with every byte never trips on a
trickle. The bound: ``--ledger-call-bound`` when given, else 10 s.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import threading
import time
from concurrent.futures import Future
from typing import Any

import pytest

from ledger_core.errors import LedgerError

from ..context import Flavor
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


def _start(ledgers: Ledgers, handle: Handle, method: str, request_id: str) -> Future[object]:
    """``method`` running unrecorded: on the suite loop (async) or a worker thread (sync)."""
    if handle.is_async:
        return ledgers.runtime.loop.submit(handle.acall(method, request_id))
    return ledgers.executor.submit(handle.call, method, request_id)


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
        odd = [
            f"{what}: {error_text(exc)}"
            for what, f in calls
            if f.done() and (exc := f.exception()) is not None
        ]
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

    @C4()
    @pytest.mark.parametrize("flavor", ["sync", "async"])
    def test_C4_calls_after_close(
        self, ledgers: Ledgers, flavor: Flavor, ledger_call_bound: float
    ) -> None:
        """A host may still hold a ledger it closed (a shutdown racing a late answer).
        Each call on it must raise (``LedgerClosed`` is the plain answer) or tell the
        store's truth, within the bound: never wait on a worker that close stopped, never
        answer from a connection it let go (a lazy reopen onto a default, empty store)."""
        label = ledgers.label(f"closed-{flavor}")
        handle = ledgers.open(label, flavor)
        spent, fresh, unread = ledgers.ids(3, f"closed-{flavor}")
        assert expect_bool(handle.spend(spent), "spend") is True
        ledgers.close_handle(handle)
        asked = [("spend", spent), ("spend", fresh)]
        if handle.has_is_spent:
            asked += [("is_spent", spent), ("is_spent", unread)]
        calls = [(m, r, _start(ledgers, handle, m, r)) for m, r in asked]
        futures: Any = [future for *_, future in calls]
        concurrent.futures.wait(futures, timeout=ledger_call_bound)
        waiting = [f"{m}({r!r})" for m, r, future in calls if not future.done()]
        for future in futures:
            future.cancel()
        assert not waiting, (
            f"on a closed {flavor} ledger, {len(waiting)} call(s) still waited after "
            f"{ledger_call_bound:g} s: {', '.join(waiting)} (raise LedgerClosed instead)"
        )
        answers = {(m, r): f.result() for m, r, f in calls if f.exception() is None}
        # what each call must answer if it answers: ``spent`` was spent before the close,
        # ``unread`` never was, and nobody but the closed ledger spent ``fresh``
        due = {("spend", spent): False, ("spend", fresh): True}
        due |= {("is_spent", spent): True, ("is_spent", unread): False}
        wrong = [
            f"{m}({r!r}) answered {a!r}" for (m, r), a in answers.items() if a is not due[m, r]
        ]
        if answers.get(("spend", fresh)) is True:
            reader = ledgers.open(label, flavor)
            held = reader.is_spent(fresh) if reader.has_is_spent else reader.spend(fresh) is False
            if held is not True:
                wrong.append(f"spend({fresh!r}) answered True, but the store does not hold it")
        assert not wrong, (
            f"a closed {flavor} ledger answered what the store does not hold: "
            + "; ".join(wrong)
            + " (a call after close must raise, or reach the same store)"
        )
