"""The worker processes: threads and asyncio tasks spending and reading overlapping ids.

Ids come in generations (fresh ones keep landing): a few *hot* ids every worker contends
for, *cold* ids a small group shares, and some reads of the previous, mostly spent one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledger_core.protocol import is_async_ledger

from ..context import LedgerContext, enter_factory
from ..loading import load_factory
from ..urlmode import URLFactory
from .recorder import Journal, Kind, error_line

READY_BOUND = 120.0  # seconds a child waits for the go (and the conductor for "ready")
STATS_EVERY = 0.5  # seconds between a child's progress reports
POLL = 0.01  # seconds between looks at the conductor's shared start and stop values
BACKOFF = 0.02  # seconds a worker pauses after a failed call (a refused port fails at once)
HOT_SHARE = 0.5
PREVIOUS_SHARE = 0.1  # of the ops, reads of the previous generation (mostly spent ids)


@dataclass(frozen=True)
class Workload:
    """What every worker does: the id space and the mix of calls."""

    tag: str  # unique per campaign: ids never collide with another run's
    hot: int = 4
    cold: int = 32
    group: int = 3  # workers sharing one set of cold ids
    generation: float = 1.0  # seconds an id set lasts
    spend_share: float = 0.6

    def pick(self, rng: random.Random, gen: int, group: int) -> tuple[Kind, str]:
        """The next call: (kind, id)."""
        kind: Kind = "s" if rng.random() < self.spend_share else "r"
        if gen > 0 and rng.random() < PREVIOUS_SHARE:
            gen, kind = gen - 1, "r"
        if rng.random() < HOT_SHARE:
            return kind, f"{self.tag}-g{gen}-hot{rng.randrange(self.hot)}"
        return kind, f"{self.tag}-g{gen}-c{group}-{rng.randrange(self.cold)}"


@dataclass(frozen=True)
class Source:
    """Where a ledger comes from: a URL (opened in ``namespace``) or a factory path."""

    url: str | None
    factory: str | None
    run_id: str

    def factory_callable(self) -> Any:
        if self.url is not None:
            return URLFactory(self.url, self.run_id)
        assert self.factory is not None
        return load_factory(self.factory)


@dataclass(frozen=True)
class ChildSpec:
    index: int
    source: Source
    store: str
    routes: dict[tuple[str, int], tuple[str, int]]
    threads: int
    tasks: int
    journal: Path
    workload: Workload
    duration: float
    ops_per_worker: int
    seed: int


class MappedRoute:
    """The conductor's proxies, seen from a child: upstream -> proxy address."""

    def __init__(self, routes: dict[tuple[str, int], tuple[str, int]]) -> None:
        self.routes = routes

    def __call__(self, host: str, port: int) -> tuple[str, int]:
        if not self.routes:
            return host, port  # nothing routable: no proxy anywhere
        try:
            return self.routes[(host, port)]
        except KeyError:
            raise LookupError(
                f"{host}:{port} was not routed when the conductor opened the ledger, so no "
                "proxy stands in front of it"
            ) from None


class Stats:
    """Live counters of one process (progress only: the journal is the record)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.counts: Counter[str] = Counter()
        self.errors: Counter[str] = Counter()

    def ok(self, kind: Kind, value: object) -> None:
        with self.lock:
            self.counts["ops"] += 1
            if kind == "s":
                self.counts["spent" if value is True else "lost"] += 1
            else:
                self.counts["reads"] += 1

    def failed(self, exc: BaseException) -> None:
        with self.lock:
            self.counts["ops"] += 1
            self.counts["errors"] += 1
            self.errors[error_line(exc).split(":", 1)[0]] += 1

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            return {"counts": dict(self.counts), "errors": dict(self.errors)}


class _Worker:
    """One worker's loop state (the same for a thread and a task)."""

    def __init__(self, spec: ChildSpec, name: str, number: int, clock: _Clock) -> None:
        self.spec = spec
        self.name = name
        self.rng = random.Random(f"{spec.seed}-{name}")
        self.group = number // max(1, spec.workload.group)
        self.clock = clock
        self.done = 0

    def next_call(self) -> tuple[Kind, str] | None:
        now = time.monotonic_ns()
        if self.done >= self.spec.ops_per_worker or self.clock.over(now):
            return None
        self.done += 1
        gen = int((now - self.clock.start_ns) / (self.spec.workload.generation * 1e9))
        return self.spec.workload.pick(self.rng, gen, self.group)


class _Clock:
    def __init__(self, start_ns: int, duration: float, stop: threading.Event) -> None:
        self.start_ns = start_ns
        self.end_ns = start_ns + int(duration * 1e9)
        self.stop = stop

    def over(self, now: int) -> bool:
        return now >= self.end_ns or self.stop.is_set()


Call = tuple[Callable[[str], Any], str, Callable[[object, "Exception | None"], None]]


def _begin(worker: _Worker, ledger: Any, journal: Journal, stats: Stats) -> Call | None:
    """The next call, journaled: (method, id, done(value, exc)); None when the worker ends."""
    call = worker.next_call()
    if call is None:
        return None
    kind, request_id = call
    seq = journal.invoke(worker.name, kind, request_id, time.monotonic_ns())

    def done(value: object, exc: Exception | None) -> None:
        now = time.monotonic_ns()
        if exc is None:
            journal.complete(seq, now, value, None)
            stats.ok(kind, value)
        else:
            journal.complete(seq, now, None, error_line(exc))
            stats.failed(exc)

    return (ledger.spend if kind == "s" else ledger.is_spent), request_id, done


def _run_thread(ledger: Any, worker: _Worker, journal: Journal, stats: Stats) -> None:
    while (call := _begin(worker, ledger, journal, stats)) is not None:
        method, request_id, done = call
        try:
            value = method(request_id)
        except Exception as exc:
            done(None, exc)
            worker.clock.stop.wait(BACKOFF)  # a refused port fails at once: no hot loop
        else:
            done(value, None)


async def _run_task(ledger: Any, worker: _Worker, journal: Journal, stats: Stats) -> None:
    native = is_async_ledger(ledger)
    while (call := _begin(worker, ledger, journal, stats)) is not None:
        method, request_id, done = call
        try:
            value = await (method(request_id) if native else asyncio.to_thread(method, request_id))
        except Exception as exc:
            done(None, exc)
            await asyncio.sleep(BACKOFF)
        else:
            done(value, None)


def _await_go(start: Any, stop: Any) -> int:
    """Poll for the conductor's start time (a shared value, never an ``mp.Event``: a
    process that dies while waiting on one hangs every later ``set()``)."""
    deadline = time.monotonic() + READY_BOUND
    while time.monotonic() < deadline and not stop.value:
        if start.value:
            return int(start.value)
        time.sleep(POLL)
    raise TimeoutError(f"no go from the conductor within {READY_BOUND:g} s")


def _watch(stop: Any, local: threading.Event, bound: float) -> None:
    deadline = time.monotonic() + bound
    while not stop.value and time.monotonic() < deadline and not local.is_set():
        time.sleep(POLL)
    local.set()


async def _campaign(spec: ChildSpec, queue: Any, start: Any, stop: Any) -> None:
    factory = spec.source.factory_callable()
    route = MappedRoute(spec.routes)
    sync, close_sync = await enter_factory(factory, LedgerContext(spec.store, route, "sync"))
    cleanups = [close_sync]
    try:
        asyn, close_async = await enter_factory(factory, LedgerContext(spec.store, route, "async"))
        cleanups.append(close_async)
        queue.put(("ready", spec.index, None))
        start_ns = await asyncio.to_thread(_await_go, start, stop)
        local_stop = threading.Event()
        clock = _Clock(start_ns, spec.duration, local_stop)
        watcher = threading.Thread(
            target=_watch, args=(stop, local_stop, spec.duration + READY_BOUND), daemon=True
        )
        watcher.start()
        journal = Journal(spec.journal)
        stats = Stats()
        prefix = f"p{spec.index}"
        threads = [
            threading.Thread(
                target=_run_thread,
                args=(sync, _Worker(spec, f"{prefix}-t{i}", i, clock), journal, stats),
                name=f"{prefix}-t{i}",
                daemon=True,
            )
            for i in range(spec.threads)
        ]
        for thread in threads:
            thread.start()
        tasks = [
            asyncio.ensure_future(
                _run_task(
                    asyn, _Worker(spec, f"{prefix}-a{i}", spec.threads + i, clock), journal, stats
                )
            )
            for i in range(spec.tasks)
        ]

        async def report() -> None:
            while not clock.over(time.monotonic_ns()):
                queue.put(("stats", spec.index, stats.snapshot()))
                await asyncio.sleep(STATS_EVERY)

        reporter = asyncio.ensure_future(report())
        await asyncio.gather(*tasks)
        for thread in threads:
            await asyncio.to_thread(thread.join)
        reporter.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reporter
        journal.close()
        local_stop.set()  # ends the watcher
        queue.put(("stats", spec.index, stats.snapshot()))
    finally:
        for cleanup in reversed(cleanups):
            with contextlib.suppress(Exception):
                await cleanup()


def child_main(spec: ChildSpec, queue: Any, start: Any, stop: Any) -> None:
    """A worker process: Ctrl-C belongs to the conductor, which stops us by ``stop``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # Drivers' own warnings (a pool's "error connecting") would flood the conductor's
    # progress under faults; every call's outcome is in the journal instead.
    logging.getLogger().addHandler(logging.NullHandler())
    try:
        asyncio.run(_campaign(spec, queue, start, stop))
    except BaseException as exc:
        queue.put(("error", spec.index, error_line(exc)))
        return
    queue.put(("done", spec.index, None))
