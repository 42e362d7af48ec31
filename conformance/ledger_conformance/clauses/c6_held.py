"""C6 after a forget that lands while a spend's request is in flight.

An identity checked in a round trip of its own is proven for that moment only. The proxy
holds a spend of a spent id at each point between its requests in turn; the store forgets
there, then the request goes on: a ``True`` under the old ``store_id`` is a second run.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable

import pytest

from ledger_core.errors import LedgerError

from ..context import Flavor
from ..declare import FORGET, ROUTABLE
from ..faults import ProxyRouter, Toxic
from ..harness import Handle, Ledgers, error_text
from .c6_forget import answers_for_forgotten, forget_now, spent_store, verdict
from .c6_identity import C6
from .common import not_exercised, partly, require_routed

MAX_CUTS = 6  # points between requests tried per flavor; a spend rarely sends more


def _open(ledgers: Ledgers, router: ProxyRouter, label: str, flavor: Flavor) -> Handle:
    handle = ledgers.open(label, flavor, route=router)
    require_routed(router, "no request could be held")
    if handle.flavor != flavor:
        not_exercised(f"the factory gave a {handle.flavor} ledger when asked for {flavor}")
    return handle


def _step(router: ProxyRouter, future: concurrent.futures.Future[object], bound: float) -> bool:
    """Wait until the spend's next request is held (True) or the spend is over (False)."""
    if not router.wait_held(future.done, bound):
        pytest.fail(f"the held spend neither sent a request nor finished in {bound:g} s")
    return not future.done()


def _forget_while_held(ledgers: Ledgers, router: ProxyRouter, forget: Callable[[], object]) -> None:
    """Run the forget while the request waits, then let it go on. A forget that itself
    waits on the held request (a lock its transaction holds) gets the watchdog's time;
    then the request goes on and the forget finishes after it (that cut then tests a
    forget after the request, no more)."""
    failed: list[BaseException] = []

    def run() -> None:
        try:
            forget_now(ledgers, forget)
        except BaseException as exc:  # pytest.fail's Failed included: raised below
            failed.append(exc)

    thread = threading.Thread(target=run, name="ledger-suite-forget", daemon=True)
    thread.start()
    thread.join(ledgers.profile.watchdog)
    router.heal()
    bound = ledgers.profile.settle
    thread.join(bound)
    if thread.is_alive():
        pytest.fail(f"the forget hook was still running {bound:g} s after the release")
    if failed:
        raise failed[0]


def _cut(
    ledgers: Ledgers, forget: Callable[[], object], flavor: Flavor, cut: int
) -> list[str] | None:
    """One cut point: the problems seen, or None when the spend ended before it."""
    bound = ledgers.profile.settle
    with ProxyRouter() as router:
        handle = _open(ledgers, router, ledgers.label(f"held-{flavor}-{cut}"), flavor)
        first, ids = spent_store(ledgers, [handle])
        router.set(Toxic.HOLD)
        future = ledgers.executor.submit(handle.call, "spend", ids[-1])
        future.add_done_callback(lambda _: _notify(router))
        for _ in range(cut):
            if not _step(router, future, bound):
                return None
            router.let_through(1)
        if not _step(router, future, bound):
            return None
        before = handle.store_id
        _forget_while_held(ledgers, router, forget)
        who = f"the {flavor} instance whose spend was held at cut {cut}"
        problems: list[str] = []
        try:
            value = future.result(bound)
        except LedgerError:
            value = None  # fail closed
        except concurrent.futures.TimeoutError:
            pytest.fail(f"{who}: the released spend did not finish within {bound:g} s")
        except Exception as exc:
            problems.append(f"{who}: spend raised a non-LedgerError: {error_text(exc)}")
            value = None
        if value is True and first in (before, handle.store_id):
            problems.append(
                f"{who}: spend({ids[-1]!r}) landed after the forget and returned True under "
                f"the old store_id {first!r}: the id was spent before the store forgot"
            )
        return problems + answers_for_forgotten(handle, first, ids, who)


def _notify(router: ProxyRouter) -> None:
    with router.held_signal:
        router.held_signal.notify_all()


class C6Held:
    @C6(FORGET, ROUTABLE)
    @pytest.mark.ledger_forgets
    @pytest.mark.parametrize("flavor", ["sync", "async"])
    def test_C6_forget_during_request(
        self,
        ledgers: Ledgers,
        ledger_forget: Callable[[], object] | None,
        flavor: Flavor,
        request: pytest.FixtureRequest,
    ) -> None:
        """At each point between a spend's requests, the whole store forgets while the
        proxy holds the next one; then it lands. No True under the old store_id."""
        assert ledger_forget is not None
        problems: list[str] = []
        for cut in range(MAX_CUTS):
            seen = _cut(ledgers, ledger_forget, flavor, cut)
            if seen is None:
                break
            problems += seen
        else:
            partly(request, f"a spend sent more than {MAX_CUTS} requests: later cuts not tried")
        verdict(problems)
