"""L1 listing (optional capability, detected by ``spent_ids``): what a migration copies.

A ledger that can list its ids lists every spent id of its store exactly once and
nothing else: no marker (H3 closes, migration lineage), no other store's id, no
identity record. Spends go on while it lists: ids spent before the listing started
must all appear; ids spent during may or may not.
"""

from __future__ import annotations

import inspect
import threading
from collections import Counter
from typing import Any

import pytest

from ledger_core.ids import MarkerKind, marker_id

from ..declare import SPENT_IDS, declare
from ..harness import CALL_BOUND, Handle, Ledgers
from .common import not_applicable, open_flavor, run_threads

BEFORE, DURING, OTHER, WORKERS = 300, 200, 20, 4

L1 = declare("L1", "listing (spent_ids): every spent id once, nothing else, under spends")


def _listing(handle: Handle) -> list[object]:
    """The whole listing, whatever its shape (an iterator or an async iterator)."""

    def sync_list() -> list[object]:
        return list(handle.ledger.spent_ids())

    async def async_list() -> list[object]:
        made: Any = handle.ledger.spent_ids()
        if inspect.isawaitable(made):
            made = await made
        if hasattr(made, "__aiter__"):
            return [item async for item in made]
        return list(made)

    if handle.is_async:
        return handle._loop.run(async_list(), timeout=CALL_BOUND * 4)
    return sync_list()


class L1Listing:
    @L1(SPENT_IDS)
    @pytest.mark.parametrize("flavor", ["sync", "async"])
    def test_L1_lists_every_spent_id_once_and_nothing_else(
        self, ledgers: Ledgers, flavor: str
    ) -> None:
        handle = open_flavor(ledgers, ledgers.label("listing"), flavor)  # type: ignore[arg-type]
        if not callable(getattr(handle.ledger, "spent_ids", None)):
            not_applicable(f"the {flavor} variant has no spent_ids (the other one has)")
        other = ledgers.open(ledgers.label("listing-other"))
        before, during = ledgers.ids(BEFORE, "before"), ledgers.ids(DURING, "during")
        for request_id in before:
            assert handle.spend(request_id) is True
        for request_id in ledgers.ids(OTHER, "other"):
            assert other.spend(request_id) is True
        if callable(getattr(handle.ledger, "spend_marker", None)):
            for kind in (MarkerKind.CLOSED_PROVEN, MarkerKind.LINEAGE):
                handle.call("spend_marker", marker_id(kind, before[0]))

        start = threading.Barrier(WORKERS + 1)
        listed: list[object] = []

        def work(i: int) -> None:
            start.wait(CALL_BOUND)
            if i == WORKERS:
                listed.extend(_listing(handle))
            else:
                for request_id in during[i::WORKERS]:
                    handle.spend(request_id)

        run_threads(WORKERS + 1, work, CALL_BOUND * 4)

        repeated = sorted(str(k) for k, n in Counter(map(repr, listed)).items() if n > 1)
        assert not repeated, f"listed more than once: {repeated[:5]}"
        missing = sorted(set(before) - set(listed))
        assert not missing, (
            f"{len(missing)} ids spent before the listing are missing: {missing[:5]}"
        )
        allowed = set(before) | set(during)
        foreign = [item for item in listed if item not in allowed]
        assert not foreign, (
            f"listed {len(foreign)} things that are no spent id of this store (a marker, "
            f"another store's id, an identity record?): {[repr(x)[:60] for x in foreign[:5]]}"
        )
