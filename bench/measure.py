"""Timing: contenders run in alternating rounds, so load drift hits every side alike.

A *cell* is one operation in one mode (``sync x1``, ``sync x32``, ``async x64``) for every
contender of a store. Each round runs every contender for the same wall time, in an order
that reverses every round (ABBA), and records the latency of every call. Throughput per
round, the median of the per-round ratios to the raw call (rounds are paired: back to back
under the same load) and latency percentiles over all calls are what the report shows.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import os
import statistics
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

T = TypeVar("T")
OpT = TypeVar("OpT")
SyncOp = Callable[[str], object]
AsyncOp = Callable[[str], Awaitable[object]]

SPEND_NEW, SPEND_SPENT, IS_SPENT = "spend (new id)", "spend (spent id)", "is_spent"
OPERATIONS = (SPEND_NEW, SPEND_SPENT, IS_SPENT)
LEDGER, RAW, PEER = "ledger", "raw", "peer"
MEETS, MISSES, UNSETTLED = "meets", "misses", "unsettled"
MIN_ROUNDS = 6  # the fewest rounds whose min..max holds the median at 95% (1 - 2 / 2**6)


@dataclass(frozen=True)
class Mode:
    """How many callers at once, and whether they are threads or asyncio tasks."""

    workers: int
    is_async: bool

    @property
    def label(self) -> str:
        return f"{'async' if self.is_async else 'sync'} x{self.workers}"


SYNC_1, SYNC_32, ASYNC_64 = Mode(1, False), Mode(32, False), Mode(64, True)
MODES = (SYNC_1, SYNC_32, ASYNC_64)


@dataclass(frozen=True)
class Bar:
    """What a cell must reach: ledger / ``against`` (a contender's name; ``None``: the
    raw call) at least ``value``. A store names its bars (``Subject.bars``)."""

    value: float = 0.95
    against: str | None = None

    def label(self) -> str:
        return f">= {self.value:.2f}" + (f" of {self.against}" if self.against else "")


_RUN = os.urandom(3).hex()  # ids never collide with an earlier run's on a kept server
_TAGS = itertools.count()


@dataclass
class Ids:
    """A contender's ids: fresh ones for new spends, and those it already spent.

    Every id taken from :meth:`fresh` is spent before a round ends (workers finish the
    call they started), so every number below the counter names a spent id.
    """

    tag: str = field(default_factory=lambda: f"{_RUN}-{next(_TAGS)}")
    _next: itertools.count[int] = field(default_factory=itertools.count)
    _taken: int = 0
    _cursor: itertools.count[int] = field(default_factory=itertools.count)

    def fresh(self) -> str:
        n = next(self._next)  # atomic under the GIL: threads never share an id
        self._taken = n + 1
        return f"{self.tag}-{n}"

    def spent(self) -> str:
        return f"{self.tag}-{next(self._cursor) % max(self._taken, 1)}"


@dataclass
class Caller(Generic[OpT]):
    """One side of a comparison: the ledger, the raw driver call, or a peer library.

    An operation mapped to ``None`` is one the contender does not have (a peer without a
    read, say); its cell is left out.
    """

    name: str
    role: str
    ops: dict[str, OpT | None]
    ids: Ids = field(default_factory=Ids)

    def op(self, operation: str) -> tuple[OpT, Callable[[], str]] | None:
        call = self.ops.get(operation)
        if call is None:
            return None
        return call, self.ids.fresh if operation == SPEND_NEW else self.ids.spent


Contender = Caller[SyncOp]
AsyncContender = Caller[AsyncOp]


def ops(spend: T, is_spent: T | None) -> dict[str, T | None]:
    """The three operations of a side whose spend is one call, new id or not."""
    return {SPEND_NEW: spend, SPEND_SPENT: spend, IS_SPENT: is_spent}


def pair(ledger: Any, raw: str, spend: SyncOp, is_spent: SyncOp) -> list[Contender]:
    """The ledger, and the raw call named ``raw`` (its spend and its read)."""
    return [
        Contender("ledger", LEDGER, ops(ledger.spend, ledger.is_spent)),
        Contender(raw, RAW, ops(spend, is_spent)),
    ]


def async_pair(ledger: Any, raw: str, spend: AsyncOp, is_spent: AsyncOp) -> list[AsyncContender]:
    return [
        AsyncContender("ledger", LEDGER, ops(ledger.spend, ledger.is_spent)),
        AsyncContender(raw, RAW, ops(spend, is_spent)),
    ]


@dataclass
class Side:
    """What one contender did in one cell: calls per second per round, latencies (s)."""

    name: str
    role: str
    rates: list[float] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return statistics.median(self.rates) if self.rates else 0.0

    def percentile(self, q: float) -> float:
        if not self.latencies:
            return float("nan")
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@dataclass
class Cell:
    store: str
    stored: int  # ids already in the store when the cell started (about)
    mode: Mode
    operation: str
    sides: list[Side]
    size: int = 0  # the size of the store this cell belongs to in the plan

    def side(self, role: str, name: str | None = None) -> Side | None:
        for side in self.sides:
            if side.role == role and (name is None or side.name == name):
                return side
        return None

    bar: Bar | None = None

    def ratios(self, other: Side) -> list[float]:
        """Ledger / ``other`` in each round (rounds are paired: back to back)."""
        ours = self.side(LEDGER)
        if ours is None:
            return []
        return [a / b for a, b in zip(ours.rates, other.rates, strict=False) if b > 0]

    def ratio(self, other: Side) -> float | None:
        """Ledger / ``other``: the median of the per-round ratios."""
        pairs = self.ratios(other)
        return statistics.median(pairs) if pairs else None

    def interval(self, other: Side) -> tuple[float, float] | None:
        """Where the median ratio lies, at about 95%: distribution-free (order statistics
        of the rounds), so one wild round on a loaded machine widens it, never moves it."""
        pairs = sorted(self.ratios(other))
        n = len(pairs)
        if n < MIN_ROUNDS:  # fewer rounds bound nothing at 95%, not even min..max
            return None
        half = 0.98 * math.sqrt(n)
        low = max(0, round(n / 2 - half) - 1)
        high = min(n - 1, round(n / 2 + half))
        return pairs[low], pairs[high]

    def bar_side(self) -> Side | None:
        """The side this cell's bar compares the ledger with."""
        if self.bar is None:
            return None
        if self.bar.against is None:
            return self.side(RAW)
        return next((s for s in self.sides if s.name == self.bar.against), None)

    def verdict(self) -> str | None:
        """``meets`` / ``misses``: the whole interval is on one side of the bar;
        ``unsettled``: the rounds swing across it."""
        side = self.bar_side()
        found = None if side is None else self.interval(side)
        if found is None or self.bar is None:
            return None
        low, high = found
        if low >= self.bar.value:
            return MEETS
        if high < self.bar.value:
            return MISSES
        return UNSETTLED


def _sync_round(call: SyncOp, next_id: Callable[[], str], workers: int, seconds: float) -> Side:
    """``workers`` threads released together by a barrier, calling for ``seconds``."""
    side = Side("", "")
    counts = [0] * workers
    lists: list[list[float]] = [[] for _ in range(workers)]
    failures: list[BaseException] = []
    barrier = threading.Barrier(workers + 1)
    stop_at = [0.0]

    def work(slot: int) -> None:
        clock, mine = time.perf_counter, lists[slot]
        barrier.wait()
        try:
            while clock() < stop_at[0]:
                request_id = next_id()
                started = clock()
                call(request_id)
                mine.append(clock() - started)
        except BaseException as exc:  # re-raised below: a failing call fails the bench
            failures.append(exc)
        counts[slot] = len(mine)

    threads = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(workers)]
    for thread in threads:
        thread.start()
    started = time.perf_counter()
    stop_at[0] = started + seconds
    barrier.wait()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    if failures:
        raise failures[0]
    side.rates.append(sum(counts) / elapsed)
    for mine in lists:
        side.latencies.extend(mine)
    return side


async def _async_round(
    call: AsyncOp, next_id: Callable[[], str], tasks: int, seconds: float
) -> Side:
    side = Side("", "")
    clock = time.perf_counter
    started = clock()
    stop_at = started + seconds

    async def work() -> list[float]:
        mine: list[float] = []
        while clock() < stop_at:
            request_id = next_id()
            began = clock()
            await call(request_id)
            mine.append(clock() - began)
        return mine

    done = await asyncio.gather(*(work() for _ in range(tasks)))
    elapsed = clock() - started
    for mine in done:
        side.latencies.extend(mine)
    side.rates.append(len(side.latencies) / elapsed)
    return side


def _merge(into: Side, got: Side) -> None:
    into.rates.extend(got.rates)
    into.latencies.extend(got.latencies)


def _order(names: Sequence[str], round_no: int) -> list[str]:
    return list(names) if round_no % 2 == 0 else list(reversed(names))


Runnable = dict[str, tuple[str, tuple[Any, Callable[[], str]]]]


def _runnable(
    contenders: Sequence[Contender] | Sequence[AsyncContender], operation: str
) -> tuple[dict[str, Side], Runnable]:
    """Each side of a cell, and the contenders that have ``operation``."""
    runnable: Runnable = {
        c.name: (c.role, op) for c in contenders if (op := c.op(operation)) is not None
    }
    return {name: Side(name, role) for name, (role, _) in runnable.items()}, runnable


def _runs(runnable: Runnable, first: int, rounds: int) -> list[tuple[str, Any, Callable[[], str]]]:
    """Rounds ``first`` .. ``first + rounds - 1``: every contender, in an order that
    reverses each round (ABBA)."""
    runs = []
    for r in range(first, first + rounds):
        for name in _order(list(runnable), r):
            call, next_id = runnable[name][1]
            runs.append((name, call, next_id))
    return runs


@dataclass(frozen=True)
class Spec:
    """One cell to time: which store, how full, which mode and operation, how long."""

    store: str
    stored: int
    mode: Mode
    operation: str
    rounds: int
    seconds: float
    bar: Bar | None = None
    max_rounds: int = 0  # rounds a cell may take while it swings across its bar

    def cell(self, sides: dict[str, Side]) -> Cell:
        values = list(sides.values())
        return Cell(self.store, self.stored, self.mode, self.operation, values, bar=self.bar)

    def more(self, cell: Cell, done: int) -> int:
        """Rounds to add: ``rounds`` again while the cell swings across its bar."""
        if cell.verdict() != UNSETTLED or done >= self.max_rounds:
            return 0
        return min(self.rounds, self.max_rounds - done)


def _batches(
    spec: Spec, sides: dict[str, Side], runnable: Runnable
) -> Iterator[list[tuple[str, Any, Callable[[], str]]]]:
    """The planned rounds, then more while the cell (as ``sides`` now stand) swings
    across its bar: one code path for the sync and the async cell."""
    done, rounds = 0, spec.rounds
    while sides and rounds:
        yield _runs(runnable, done, rounds)
        done += rounds
        rounds = spec.more(spec.cell(sides), done)


def sync_cell(spec: Spec, contenders: Sequence[Contender]) -> Cell | None:
    sides, runnable = _runnable(contenders, spec.operation)
    for runs in _batches(spec, sides, runnable):
        for name, call, next_id in runs:
            _merge(sides[name], _sync_round(call, next_id, spec.mode.workers, spec.seconds))
    return spec.cell(sides) if sides else None


async def async_cell(spec: Spec, contenders: Sequence[AsyncContender]) -> Cell | None:
    sides, runnable = _runnable(contenders, spec.operation)
    for runs in _batches(spec, sides, runnable):
        for name, call, next_id in runs:
            side = await _async_round(call, next_id, spec.mode.workers, spec.seconds)
            _merge(sides[name], side)
    return spec.cell(sides) if sides else None


def warm_up(contenders: Sequence[Contender], calls: int = 50) -> None:
    """Open connections, prepare statements, and leave spent ids for the spent-id cells."""
    for contender in contenders:
        for operation in OPERATIONS:
            found = contender.op(operation)
            if found is not None:
                call, next_id = found
                for _ in range(calls):
                    call(next_id())


async def warm_up_async(contenders: Sequence[AsyncContender], tasks: int, calls: int = 50) -> None:
    for contender in contenders:
        for operation in OPERATIONS:
            found = contender.op(operation)
            if found is not None:
                call, next_id = found
                for _ in range(max(1, calls // tasks)):
                    await asyncio.gather(*(call(next_id()) for _ in range(tasks)))
