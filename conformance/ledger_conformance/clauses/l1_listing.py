"""L1 listing (optional capability, detected by ``spent_ids``): what a migration copies.

Every spent id of the store exactly once and nothing else (no marker, no other store's
id); ids spent before the listing started must all appear, ids spent during may.
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
from .c2_volume import spend_all
from .common import not_applicable, open_flavor, run_threads

BEFORE, DURING, OTHER, WORKERS = 300, 200, 20, 4

L1 = declare("L1", "listing (spent_ids): every spent id once, nothing else, under spends")


# The keyword a listing primitive may take for its page size: L1 beyond one page lists
# with a small odd page as well, so a skip at a page boundary shows on any volume.
PAGE_KEYWORDS = ("page", "page_size", "count", "limit", "batch_size")
SMALL_PAGE = 97
# ids spent, one at a time, when C2 volume did not pass (every shipped page is 1,000): in
# sequence, since a store that waits little on a busy file fails parallel spends then
PAGES_FALLBACK = 1_500


def listing(
    handle: Handle, method: str = "spent_ids", page: dict[str, int] | None = None
) -> list[object]:
    """The whole listing (``spent_ids`` or ``namespaces``), whatever its shape (an
    iterator, an async iterator, or an awaitable of either)."""

    async def async_list() -> list[object]:
        made: Any = getattr(handle.ledger, method)(**(page or {}))
        if inspect.isawaitable(made):
            made = await made
        if hasattr(made, "__aiter__"):
            return [item async for item in made]
        return list(made)

    if handle.is_async:
        return handle._loop.run(async_list(), timeout=CALL_BOUND * 4)
    return list(getattr(handle.ledger, method)(**(page or {})))


def _page_keyword(handle: Handle) -> str | None:
    """The page-size keyword the listing primitive takes, if any."""
    try:
        parameters = inspect.signature(handle.ledger.spent_ids).parameters
    except (TypeError, ValueError):
        return None
    return next((name for name in PAGE_KEYWORDS if name in parameters), None)


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
                listed.extend(listing(handle))
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

    @L1(SPENT_IDS)
    @pytest.mark.parametrize("flavor", ["sync", "async"])
    def test_L1_lists_beyond_one_page(self, ledgers: Ledgers, flavor: str) -> None:
        """Every id of a store larger than any page, exactly once: C2 volume's store (10,000
        ids), listed whole and, when the listing takes a page size, in pages of 97 (a
        cursor that skips or repeats the item at a page boundary)."""
        found = ledgers.runtime.volume.get(ledgers.suite_key)
        if found is not None:
            label, ids, _ = found
        else:  # C2 volume did not pass or run: a store of its own, past every page size
            label, ids = ledgers.label("pages"), ledgers.ids(PAGES_FALLBACK, "page")
            errors = spend_all(ledgers.open(label), ids, 1)
            assert not errors, f"{len(errors)} spends failed without any fault: {errors[0]}"
        handle = open_flavor(ledgers, label, flavor)  # type: ignore[arg-type]
        if not callable(getattr(handle.ledger, "spent_ids", None)):
            not_applicable(f"the {flavor} variant has no spent_ids (the other one has)")
        keyword = _page_keyword(handle)
        pages = [{}] if keyword is None else [{}, {keyword: SMALL_PAGE}]
        problems: list[str] = []
        expected = set(ids)
        order = {request_id: n for n, request_id in enumerate(ids)}
        for page in pages:
            listed = listing(handle, page=page)
            how = f"spent_ids({keyword}={SMALL_PAGE})" if page else "spent_ids()"
            counts = Counter(map(repr, listed))
            repeated = sum(1 for n in counts.values() if n > 1)
            missing = sorted(expected - set(listed), key=order.__getitem__)
            foreign = [x for x in listed if x not in expected]
            if missing:
                at = [order[m] for m in missing[:5]]
                problems.append(f"{how}: {len(missing)} of {len(ids)} ids missing (spend #{at}...)")
            if repeated or foreign:
                problems.append(f"{how}: {repeated} listed twice, {len(foreign)} foreign")
        assert not problems, (
            "; ".join(problems) + ". Usual causes: a cursor that restarts after (or at) the "
            "last item of a page, an offset advanced by the page size plus one, a page whose "
            "last key is dropped. Look at how spent_ids pages through the store."
        )
