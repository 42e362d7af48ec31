"""A tiny ratio harness: ours against the raw driver call, interleaved in one run.

Rounds alternate between the two sides so drift (disk caches, CPU frequency) hits both
alike; the median round decides. Ratios, not absolute numbers, are what we compare
across machines.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

Op = Callable[[str], object]


@dataclass(frozen=True)
class Comparison:
    name: str
    ours: float  # ops/s, median round
    raw: float

    @property
    def ratio(self) -> float:
        return self.ours / self.raw

    def line(self) -> str:
        return (
            f"{self.name:<38} ours {self.ours:>10,.0f}/s  raw {self.raw:>10,.0f}/s  "
            f"ratio {self.ratio:.3f}"
        )


def throughput(op: Op, ids: Iterable[str]) -> float:
    ids = list(ids)
    start = time.perf_counter()
    for request_id in ids:
        op(request_id)
    return len(ids) / (time.perf_counter() - start)


def compare(
    name: str, ours: Op, raw: Op, make_ids: Callable[[str, int], list[str]], rounds: int = 7
) -> Comparison:
    """Run ``rounds`` interleaved rounds; ``make_ids(side, round)`` gives fresh ids."""
    ours_rates: list[float] = []
    raw_rates: list[float] = []
    for r in range(rounds):
        first, second = (
            ((ours, "ours"), (raw, "raw")) if r % 2 == 0 else ((raw, "raw"), (ours, "ours"))
        )
        for op, side in (first, second):
            rate = throughput(op, make_ids(side, r))
            (ours_rates if side == "ours" else raw_rates).append(rate)
    return Comparison(name, statistics.median(ours_rates), statistics.median(raw_rates))
