"""L1 over long and edge ids: a listing returns every id as it was spent.

Listings elsewhere hold short generated ids; a listing that drops, cuts or decodes ids
past some length (a key column, a page's byte budget, a decoder that gives up on a
byte) shows only on ids of 100 to 1024 bytes and C8's edge ids, spent one at a time and,
when offered, in batches.
"""

from __future__ import annotations

from collections import Counter

import pytest

from ledger_core.ids import closed_proven_marker

from ..declare import MARKERS, SPENT_IDS
from ..harness import Ledgers
from .c8_ids import EDGE_IDS, shown
from .common import not_applicable, open_flavor
from .drawn import drawn_ids, record_batch, replayable
from .l1_listing import L1, SMALL_PAGE, _page_keyword, listing


class L1Drawn:
    @L1(SPENT_IDS)
    @pytest.mark.parametrize("flavor", ["sync", "async"])
    def test_L1_axes_long_and_edge_ids(self, ledgers: Ledgers, flavor: str) -> None:
        """Long and edge ids listed exactly as spent, each once (whole, and
        in small pages when the listing takes a page size)."""
        with replayable(ledgers) as axes:
            handle = open_flavor(ledgers, ledgers.label("drawn-listing"), flavor)  # type: ignore[arg-type]
            if not handle.has(SPENT_IDS):
                not_applicable(f"the {flavor} variant has no spent_ids (the other one has)")
            ids = drawn_ids(ledgers, axes, f"listing-{flavor}", edges=len(EDGE_IDS))
            batched = ids[1::2] if callable(getattr(handle.ledger, "spend_many", None)) else []
            for rid in ids:
                if rid not in batched:
                    assert handle.spend(rid) is True, f"the first spend of {shown(rid)}"
            if batched:
                answers = record_batch(ledgers, handle, "spend_many", batched, "batch")
                assert answers == [True] * len(batched), "a first spend_many was not all True"
            if handle.has(MARKERS):
                handle.call("spend_marker", closed_proven_marker(ids[0]))
            keyword = _page_keyword(handle)
            pages = [{}] if keyword is None else [{}, {keyword: SMALL_PAGE}]
            problems: list[str] = []
            for page in pages:
                listed = listing(handle, page=page)
                counts = Counter(listed)
                missing = [rid for rid in ids if counts[rid] == 0]
                twice = [rid for rid in ids if counts[rid] > 1]
                foreign = [x for x in counts if x not in set(ids)]
                how = f"spent_ids({keyword}={SMALL_PAGE})" if page else "spent_ids()"
                if missing:
                    sizes = sorted({len(m.encode()) for m in missing})
                    problems.append(
                        f"{how}: {len(missing)} of {len(ids)} ids missing (of "
                        f"{sizes[:6]} bytes), e.g. {[shown(m) for m in missing[:3]]}"
                    )
                if twice or foreign:
                    problems.append(
                        f"{how}: {len(twice)} listed twice, {len(foreign)} not as spent "
                        f"(cut or decoded?): {[shown(x) for x in foreign[:3]]}"
                    )
            assert not problems, (
                "; ".join(problems) + ". Usual causes: a listing that skips ids past a "
                "length (a key column, a page's byte budget), cuts or re-encodes them, or "
                "drops what it cannot decode. Look at spent_ids."
            )
