"""C1 once: of any number of concurrent spends of one id, exactly one returns True."""

from __future__ import annotations

import asyncio
import multiprocessing
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from ..context import Factory, LedgerContext, enter_factory
from ..declare import declare
from ..harness import CALL_BOUND, KEY_SEPARATOR, Ledgers, error_text
from ..history import History, Op
from .common import (
    FORK,
    assert_linearizable,
    assert_one_winner,
    call,
    collect,
    empty_results,
    expect_bool,
    forked,
    open_flavor,
    require_store_id,
    run_bound,
    run_threads,
)

C1 = declare("C1", "once: exactly one True per id (threads, tasks, processes, fork)")
STAGGER_PROBES = 5  # spends timed per variant before the staggered race
STAGGER_STEPS = 24  # ids, each with its own delay between the two variants' release
STAGGER_MAX = 2.0  # seconds: the longest delay, however slow a variant is


def _child(factory: Factory, label: str, ids: list[str], barrier: Any, results: Any) -> None:
    """One OS process: re-open the ledger, then spend every id as the barrier releases it."""
    process = f"pid{multiprocessing.current_process().pid}"

    async def run() -> list[Op]:
        ledger, cleanup = await enter_factory(factory, LedgerContext(store=label))
        ops: list[Op] = []
        try:
            for request_id in ids:
                barrier.wait(CALL_BOUND)
                key = f"{label}{KEY_SEPARATOR}{request_id}"
                invoke = time.monotonic_ns()
                try:
                    value, error = await call(ledger, "spend", request_id), None
                except Exception as exc:
                    value, error = None, error_text(exc)
                ops.append(Op(process, "spend", key, invoke, time.monotonic_ns(), value, error))
        finally:
            await cleanup()
        return ops

    try:
        ops = asyncio.run(run())
        results.put(("ok", History(ops).to_json()))
    except BaseException as exc:
        barrier.abort()
        results.put(("error", error_text(exc)))


def _race(
    ledgers: Ledgers,
    ids: list[str],
    workers: int,
    spend: Callable[[int, int, str], object],
    context: str,
) -> None:
    """``workers`` threads released together on each id, worker ``i`` spending the
    ``step``-th id with ``spend(i, step, id)``: exactly one True per id."""
    results = empty_results(ids)
    barrier = threading.Barrier(workers)

    def worker(i: int) -> None:
        for step, request_id in enumerate(ids):
            barrier.wait(CALL_BOUND)
            collect(results, request_id, partial(spend, i, step))

    run_threads(workers, worker, run_bound(len(ids)))
    assert_one_winner(results, context)
    assert_linearizable(ledgers, "C1")


class C1Once:
    @C1()
    def test_C1_sequential(self, ledgers: Ledgers) -> None:
        first = ledgers.open(ledgers.label())
        ids = ledgers.ids(10)
        for request_id in ids:
            assert expect_bool(first.spend(request_id), "first spend") is True, (
                f"the first spend of {request_id!r} did not return True"
            )
            assert expect_bool(first.spend(request_id), "second spend") is False, (
                f"a second spend of {request_id!r} did not return False"
            )
        other = ledgers.open(ledgers.label())
        for request_id in ids:
            assert expect_bool(other.spend(request_id), "spend on a new instance") is False, (
                f"a new instance on the same store spent {request_id!r} again"
            )
        assert_linearizable(ledgers, "C1")

    @C1()
    def test_C1_threads(self, ledgers: Ledgers) -> None:
        profile = ledgers.profile
        handle = ledgers.open(ledgers.label())
        ids = ledgers.ids(profile.ids)
        context = f"{profile.threads} threads per id"
        _race(ledgers, ids, profile.threads, lambda i, _, rid: handle.spend(rid, f"t{i}"), context)

    @C1()
    def test_C1_asyncio_tasks(self, ledgers: Ledgers) -> None:
        profile = ledgers.profile
        handle = open_flavor(ledgers, ledgers.label(), "async")
        ids = ledgers.ids(profile.ids)
        results = empty_results(ids)

        async def one(request_id: str, gate: asyncio.Event, i: int) -> object:
            await gate.wait()
            try:
                return await handle.aspend(request_id, f"task{i}")
            except Exception as exc:
                return exc

        async def main() -> None:
            for request_id in ids:
                gate = asyncio.Event()
                tasks = [
                    asyncio.ensure_future(one(request_id, gate, i)) for i in range(profile.tasks)
                ]
                await asyncio.sleep(0)  # every task reaches the gate before it opens
                gate.set()
                results[request_id] = list(await asyncio.gather(*tasks))

        ledgers.runtime.loop.run(main(), timeout=run_bound(len(ids)))
        assert_one_winner(results, f"{profile.tasks} asyncio tasks per id")
        assert_linearizable(ledgers, "C1")

    @C1()
    def test_C1_processes(self, ledgers: Ledgers) -> None:
        profile = ledgers.profile
        label = ledgers.label()
        probe = ledgers.open(label)
        require_store_id(probe, "once")
        ids = ledgers.ids(profile.process_ids)
        barrier = FORK.Barrier(profile.processes)
        queue = FORK.Queue()
        child = partial(_child, ledgers.factory, label, ids, barrier, queue)
        replies: list[tuple[str, Any]] = []
        with forked(*[child] * profile.processes, name="child"):
            for _ in range(profile.processes):
                replies.append(queue.get(timeout=run_bound(len(ids))))
        errors = [text for status, text in replies if status == "error"]
        assert not errors, f"a child process failed: {errors[0]}"
        results = empty_results(ids)
        for _, data in replies:
            for request_id, op in ledgers.adopt(label, History.from_json(data).ops):
                results[request_id].append(op.result if op.error is None else op.error)
        assert_one_winner(results, f"{profile.processes} OS processes per id")
        assert_linearizable(ledgers, "C1")

    @C1()
    def test_C1_mixed_sync_async(self, ledgers: Ledgers) -> None:
        profile = ledgers.profile
        label = ledgers.label()
        sync = open_flavor(ledgers, label, "sync")
        asyn = open_flavor(ledgers, label, "async")

        def spend(i: int, _: int, request_id: str) -> object:
            handle = sync if i % 2 else asyn
            return handle.spend(request_id, f"{handle.flavor}{i}")

        ids = ledgers.ids(profile.mixed_ids)
        _race(ledgers, ids, 16, spend, "sync and async instances on one store")

    @C1()
    def test_C1_mixed_staggered(self, ledgers: Ledgers) -> None:
        """Sync and async callers released apart, the slower variant first and the faster
        one after a delay swept from 0 to 1.2 times the slower one's spend: released all at
        once, a fast path usually finishes before a slow one looks, which hides a race
        between the variants (each checking the other's record, then writing its own)."""
        label = ledgers.label()
        sync = open_flavor(ledgers, label, "sync")
        asyn = open_flavor(ledgers, label, "async")
        latency: dict[str, float] = {}
        for handle in (sync, asyn):  # warm, then time a few spends of fresh ids
            times = []
            for request_id in ledgers.ids(STAGGER_PROBES, f"probe-{handle.flavor}"):
                start = time.monotonic()
                handle.spend(request_id, f"probe-{handle.flavor}")
                times.append(time.monotonic() - start)
            latency[handle.flavor] = sorted(times)[len(times) // 2]
        slow, fast = (asyn, sync) if latency["async"] >= latency["sync"] else (sync, asyn)
        span = min(STAGGER_MAX, 1.2 * latency[slow.flavor])
        per_side = 4

        def spend(i: int, step: int, request_id: str) -> object:
            handle = slow if i < per_side else fast
            if handle is fast:
                time.sleep(span * step / (STAGGER_STEPS - 1))  # the stagger, not a fix
            return handle.spend(request_id, f"{handle.flavor}{i}")

        context = (
            f"{slow.flavor} callers released first, {fast.flavor} ones 0-{span * 1000:.0f} ms later"
        )
        _race(ledgers, ledgers.ids(STAGGER_STEPS), 2 * per_side, spend, context)
