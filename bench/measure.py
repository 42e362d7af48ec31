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
import os
import statistics
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

T = TypeVar("T")
OpT = TypeVar("OpT")
SyncOp = Callable[[str], object]
AsyncOp = Callable[[str], Awaitable[object]]

SPEND_NEW, SPEND_SPENT, IS_SPENT = "spend (new id)", "spend (spent id)", "is_spent"
OPERATIONS = (SPEND_NEW, SPEND_SPENT, IS_SPENT)
LEDGER, RAW, PEER = "ledger", "raw", "peer"


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

    def ratio(self, other: Side) -> float | None:
        """Ledger / ``other``: the median of the per-round ratios (paired rounds)."""
        ours = self.side(LEDGER)
        if ours is None or not ours.rates or not other.rates:
            return None
        pairs = [a / b for a, b in zip(ours.rates, other.rates, strict=False) if b > 0]
        return statistics.median(pairs) if pairs else None


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


def _schedule(
    contenders: Sequence[Contender] | Sequence[AsyncContender], operation: str, rounds: int
) -> tuple[dict[str, Side], list[tuple[str, Any, Callable[[], str]]]]:
    """Each side of a cell, and the runs to make: every round, every contender that has
    ``operation``, in an order that reverses each round (ABBA)."""
    runnable = {c.name: (c.role, op) for c in contenders if (op := c.op(operation)) is not None}
    sides = {name: Side(name, role) for name, (role, _) in runnable.items()}
    runs = []
    for r in range(rounds):
        for name in _order(list(runnable), r):
            call, next_id = runnable[name][1]
            runs.append((name, call, next_id))
    return sides, runs


@dataclass(frozen=True)
class Spec:
    """One cell to time: which store, how full, which mode and operation, how long."""

    store: str
    stored: int
    mode: Mode
    operation: str
    rounds: int
    seconds: float

    def cell(self, sides: dict[str, Side]) -> Cell:
        return Cell(self.store, self.stored, self.mode, self.operation, list(sides.values()))


def sync_cell(spec: Spec, contenders: Sequence[Contender]) -> Cell | None:
    sides, runs = _schedule(contenders, spec.operation, spec.rounds)
    for name, call, next_id in runs:
        _merge(sides[name], _sync_round(call, next_id, spec.mode.workers, spec.seconds))
    return spec.cell(sides) if sides else None


async def async_cell(spec: Spec, contenders: Sequence[AsyncContender]) -> Cell | None:
    sides, runs = _schedule(contenders, spec.operation, spec.rounds)
    for name, call, next_id in runs:
        _merge(sides[name], await _async_round(call, next_id, spec.mode.workers, spec.seconds))
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
