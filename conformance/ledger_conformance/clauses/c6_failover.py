"""C6 after failover: under one ``store_id``, a failover never turns a spent id back
into an unspent one.

A lagging replica loses the last acknowledged writes; the ledger must then never prove
(``store_id`` None), take another ``store_id``, or keep every spend. The spends race the
hook; runs last, since a lossy failover may lose every id of the run.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from ledger_core.errors import LedgerError

from ..declare import FAILOVER
from ..harness import Handle, Ledgers, error_text
from .c6_forget import answers_for_forgotten, run_hook, verdict
from .c6_identity import C6
from .common import expect_bool, not_applicable, note, open_both

FAILOVER_IDS = 40  # spent right before the hook, half on each variant
LOST = "the id answered True under this store_id before the failover"


def _race(handle: Handle, ids: list[str], first: str, stop: threading.Event) -> list[str]:
    """Spend ``ids`` one by one until ``stop``: the ones that answered True under S."""
    won: list[str] = []
    for request_id in ids:
        if stop.is_set():
            break
        try:
            value = handle.call("spend", request_id)
        except LedgerError:
            continue  # indeterminate: not acknowledged
        if value is True and handle.store_id == first:
            won.append(request_id)
    return won


class C6Failover:
    @C6(FAILOVER)
    @pytest.mark.ledger_forgets
    def test_C6_failover(
        self,
        ledgers: Ledgers,
        ledger_failover: Callable[[], object] | None,
        request: pytest.FixtureRequest,
    ) -> None:
        """Spends acknowledged under S right before and during a failover stay spent
        under S on every instance that still answers with S, old or new."""
        assert ledger_failover is not None
        label = ledgers.label("failover")
        old = open_both(ledgers, label)
        first = old[0].store_id
        if first is None:
            not_applicable("store_id is None: the ledger never proves, so no spend can be lost")
        assert isinstance(first, str), f"store_id must be a str or None, not {first!r}"
        acked = ledgers.ids(FAILOVER_IDS, "acked")
        for n, request_id in enumerate(acked):
            assert expect_bool(old[n % len(old)].call("spend", request_id), "spend") is True
        stop = threading.Event()
        racing: list[str] = []
        racer = threading.Thread(
            target=lambda: racing.extend(_race(old[-1], ledgers.ids(10_000, "race"), first, stop)),
            name="ledger-suite-failover-racer",
            daemon=True,
        )
        racer.start()
        try:
            run_hook(ledgers, ledger_failover, "failover")
        finally:
            stop.set()
            racer.join(ledgers.profile.settle)
        assert not racer.is_alive(), "a spend racing the failover did not finish"
        spent = [*acked, *racing]
        problems: list[str] = []
        for handle in old:
            who = f"the {handle.flavor} instance opened before the failover"
            problems += answers_for_forgotten(handle, first, spent, who, why=LOST)
        answered: list[str] = []
        for flavor in dict.fromkeys(h.flavor for h in old):
            who = f"a {flavor} instance opened after the failover"
            try:
                fresh = ledgers.open(label, flavor)
            except LedgerError as exc:
                answered.append(f"{who} refused to open ({error_text(exc)})")
                continue
            answered.append(
                f"{who} reports {'the same' if fresh.store_id == first else 'another'} store_id"
            )
            problems += answers_for_forgotten(fresh, first, spent, who, why=LOST)
        note(
            request,
            f"failover: {len(spent)} acknowledged spend(s) ({len(racing)} racing the hook); "
            + "; ".join(answered),
        )
        verdict(problems, "the store failed over and lost acknowledged spends")
