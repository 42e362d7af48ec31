"""C4 fail closed and C5 ambiguity, through the TCP fault proxy.

A call under a fault may raise or return, but a ``True`` must be backed by a record and a
read must never say ``False`` for a spent id.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Mapping
from typing import Any, cast

import pytest

from ledger_core.errors import LedgerError, UnsafeStoreConfig
from ledger_core.opening import LOCAL_FAULTS, LocalFault

from ..declare import ROUTABLE, declare
from ..faults import ProxyRouter, Toxic
from ..harness import Handle, Ledgers, error_text
from .common import (
    assert_linearizable,
    expect_bool,
    not_exercised,
    open_both,
    partly,
    require_routed,
)

LATENCY = 0.2
C4 = declare("C4", "fail closed: a fault raises; never a false True, never a false False")
C5 = declare("C5", "ambiguity: a write whose reply was lost is resolved, not guessed")


def _open_routed(ledgers: Ledgers, router: ProxyRouter) -> list[Handle]:
    handles = open_both(ledgers, ledgers.label(), router)
    require_routed(router)
    return handles


def _settle(
    ledgers: Ledgers, router: ProxyRouter, futures: list[concurrent.futures.Future[object]]
) -> tuple[list[str], bool]:
    """Wait a little under the fault, then heal and wait (bounded): what still hung, and
    whether a server reply was dropped under the fault."""
    profile = ledgers.profile
    _, pending = concurrent.futures.wait(futures, timeout=profile.watchdog)
    dropped = router.wait_reply_dropped(0)
    router.heal()
    router.reset_connections()  # unstick what a black hole or a lost reply still holds
    if pending:
        _, pending = concurrent.futures.wait(pending, timeout=profile.settle)
    if pending:
        return [f"{len(pending)} call(s) still running {profile.settle:g} s after healing"], dropped
    return [], dropped


def _unexpected_errors(futures: list[concurrent.futures.Future[object]]) -> list[str]:
    """Failures must be LedgerError subclasses (C4), never a raw driver exception."""
    bad: list[str] = []
    for future in futures:
        if not future.done():
            continue
        exc = future.exception()
        if exc is not None and not isinstance(exc, LedgerError):
            bad.append(error_text(exc))
    return bad


def _submit_calls(
    handle: Handle, taken: list[str], fresh: list[str], who: str
) -> list[concurrent.futures.Future[object]]:
    """Start the calls a fault is tried on: spend and read ``taken``, spend ``fresh``."""
    futures = []
    for request_id in taken:
        futures.append(handle.submit("spend", request_id, who))
        if handle.has_is_spent:
            futures.append(handle.submit("is_spent", request_id, who))
    for request_id in fresh:
        futures.append(handle.submit("spend", request_id, who))
    return futures


def _call_again(healthy: Handle, ids: list[str]) -> None:
    """Each id spent (and read) again when healthy: the checker holds it to the fault's."""
    for request_id in ids:
        healthy.spend(request_id, "after")
        if healthy.has_is_spent:
            healthy.is_spent(request_id, "after")


def _under_fault(ledgers: Ledgers, toxic_name: str, clause: str) -> bool:
    """Run the scenario; return whether the proxy saw a reply dropped (for C5)."""
    toxic = Toxic(toxic_name)
    count = ledgers.profile.fault_ids
    with ProxyRouter() as router:
        handles = _open_routed(ledgers, router)
        taken = ledgers.ids(count, "taken")
        fresh = ledgers.ids(count * len(handles), "fresh")
        for request_id in taken:
            assert expect_bool(handles[0].spend(request_id, "setup"), "spend") is True
        for handle in handles:  # warm every variant's connections before the fault
            if handle.has_is_spent:
                handle.is_spent(taken[0], f"warm-{handle.flavor}")
        router.set(toxic, latency=LATENCY if toxic is Toxic.LATENCY else 0.0)
        futures: list[concurrent.futures.Future[object]] = []
        for n, handle in enumerate(handles):
            who = f"{toxic.value}-{handle.flavor}"
            futures += _submit_calls(handle, taken, fresh[n * count : (n + 1) * count], who)
        hung, dropped = _settle(ledgers, router, futures)
    assert not hung, f"under {toxic.value}: " + hung[0]
    bad = _unexpected_errors(futures)
    assert not bad, f"under {toxic.value}, a call raised a non-LedgerError: {bad[0]}"
    _call_again(ledgers.open(handles[0].label), [*taken, *fresh])  # no proxy
    assert_linearizable(ledgers, clause)
    return dropped


class C45Faults:
    @C4(ROUTABLE)
    @pytest.mark.parametrize("toxic", ["refuse", "reset", "latency", "blackhole"])
    def test_C4_fail_closed(self, ledgers: Ledgers, toxic: str) -> None:
        _under_fault(ledgers, toxic, "C4")

    @C5(ROUTABLE)
    @pytest.mark.parametrize("toxic", ["drop_replies", "reset_after_request"])
    def test_C5_ambiguous_write(self, ledgers: Ledgers, toxic: str) -> None:
        if not _under_fault(ledgers, toxic, "C5"):
            not_exercised("no server reply was dropped, so no write was ambiguous")


OfferedFaults = Mapping[str, LocalFault]


def _not_offered(faults: OfferedFaults) -> list[str]:
    """The known faults the factory left out, each with its reason (a
    :class:`ledger_core.opening.LocalFaults` says why in ``withheld``)."""
    withheld: Mapping[str, str] = getattr(faults, "withheld", None) or {}
    names = [*LOCAL_FAULTS, *sorted(set(withheld) - set(LOCAL_FAULTS))]
    return [
        f"{name} not offered ({withheld.get(name, 'the factory gave no reason')})"
        for name in names
        if name not in faults
    ]


def _still_broken(name: str, later: list[concurrent.futures.Future[object]]) -> list[str]:
    """Calls of the same instance that raised once the fault was over and the store
    healthy again: something the fault spoiled is still in use (a pooled read-only
    connection, a breaker that never closes). Only after ``removed`` may a ledger refuse
    for good, and then only as UnsafeStoreConfig: it saw its file deleted or replaced."""
    raised = [f.exception() for f in later if f.done() and f.exception() is not None]
    return [
        error_text(exc)
        for exc in raised
        if isinstance(exc, LedgerError)
        and not (name == "removed" and isinstance(exc, UnsafeStoreConfig))
    ]


class C4LocalFaults:
    """C4 for a store without a network address: faults the factory's side offers."""

    @pytest.fixture
    def ledger_local_faults(self, ledger_factory: Any) -> OfferedFaults | None:
        """Fault name (``locked``, ``read-only``, ``full``, ``removed``) -> a callable that
        returns a context manager inside which the whole store under test suffers that
        fault. Default: the factory's ``ledger_local_faults`` attribute, or what it returns
        when it is a callable (probed when the clause runs, not when the factory's module
        is imported; a URL run: the backend's ``local_faults`` hook), else none."""
        found = getattr(ledger_factory, "ledger_local_faults", None)
        return cast("OfferedFaults | None", found() if callable(found) else found)

    @pytest.mark.clause("C4")
    def test_C4_local_faults(
        self,
        ledgers: Ledgers,
        ledger_local_faults: OfferedFaults | None,
        request: pytest.FixtureRequest,
    ) -> None:
        """Spent and fresh ids tried under each local fault, held longer than a store's
        short busy wait: a call may raise or wait, never answer wrong; afterwards the same
        instance works again (after ``removed`` it may refuse with UnsafeStoreConfig)."""
        if ledger_local_faults is None:
            not_exercised(
                "the factory offers no local faults (ledger_local_faults: locked, read-only, "
                "full, removed)"
            )
        if not ledger_local_faults:
            not_exercised(
                "no local fault works here: " + "; ".join(_not_offered(ledger_local_faults))
            )
        for why in _not_offered(ledger_local_faults):
            partly(request, why)
        profile = ledgers.profile
        for name, fault in sorted(ledger_local_faults.items()):
            label = ledgers.label(f"local-{name}")
            handle = ledgers.open(label)
            taken = ledgers.ids(profile.fault_ids, "taken")
            fresh = ledgers.ids(profile.fault_ids, "fresh")
            for request_id in taken:
                assert expect_bool(handle.spend(request_id, "setup"), "spend") is True
            with fault():
                futures = _submit_calls(handle, taken, fresh, name)
                concurrent.futures.wait(futures, timeout=profile.local_fault_hold)
            _, pending = concurrent.futures.wait(futures, timeout=profile.settle)
            assert not pending, f"{len(pending)} call(s) still running after the {name} fault"
            # The fault is over: the same instance works again, never answers wrong and
            # never keeps failing (a connection spoiled by the fault, still pooled).
            later = [handle.submit("spend", r, f"after-{name}") for r in [*taken, *fresh]]
            if handle.has_is_spent:
                later += [handle.submit("is_spent", r, f"after-{name}") for r in [*taken, *fresh]]
            _, pending = concurrent.futures.wait(later, timeout=profile.settle)
            assert not pending, f"{len(pending)} call(s) hung after the {name} fault ended"
            bad = _unexpected_errors([*futures, *later])
            assert not bad, f"under {name}, a call raised a non-LedgerError: {bad[0]}"
            broken = _still_broken(name, later)
            assert not broken, (
                f"the same instance stayed broken after the {name} fault ended: "
                f"{len(broken)} of {len(later)} call(s) raised on a healthy store, e.g. "
                f"{broken[0]}"
            )
            _call_again(ledgers.open(label), [*taken, *fresh])
        assert_linearizable(ledgers, "C4")
