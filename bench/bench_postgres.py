"""Ledger ``spend``/``is_spent`` against the raw statement through the same pool.

Run: ``python -m bench.bench_postgres`` (starts its own server like the tests do, or
uses ``LEDGER_TEST_POSTGRES_URL``). Prints throughput and ours/raw ratios for:

- ``own pool``: a ledger opened from a URL (its pool's sessions are set up once, so a
  spend is one autocommit INSERT), raw statements borrowed from that same pool;
- ``host pool``: ``from_pool`` on a pool the host owns (each spend framed in its own
  READ COMMITTED transaction, pipelined), raw statements on that same pool;

each sync (one thread, and 32 threads) and async (32 tasks). Measurements alternate
ours/raw in short rounds (ABBA) so drift hits both; the ratio to trust is the median
of the per-round paired ratios. ``us/call`` is wall time per call and worker
(1 / per-worker throughput): at one thread, the difference is our client overhead.

``--client-cost`` runs the server with ``fsync = off`` (set server-wide for this run
only, with ``ALTER SYSTEM``; never how a ledger should run: it then reports
``store_id`` None). Both sides still commit synchronously, but no commit waits for
the disk, whose flush times otherwise swing far more than the client's work: this
mode measures what the ledger adds on the client, the default mode what a host sees.

``--per-call`` (implies ``--client-cost``) only times single-thread spends: 30
alternated rounds of 1000 each side, wall and thread CPU microseconds per call, paired
per round (median of ours minus raw).

``--own`` runs only what issue 16 targets, on the ledger's own pool: sync at 32
threads and async at 32 tasks, ``--repeat N`` times (default 3) to show the spread.

``--guard-cost`` prices the guard each statement carries (the genesis row, and for a
proving ledger's spends ``fsync`` and the table's persistence) on the server: the raw
INSERT and SELECT against the ledger's guarded statements, genesis only and full, on one
connection whose commits do not wait for the disk (``synchronous_commit = off`` there
only: ``fsync`` stays on, as the full guard requires), 30 alternated rounds of 1000,
medians per call.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import statistics
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from ledger_core.registry import open_async_ledger, open_ledger
from ledger_postgres import AsyncPostgresLedger, PostgresLedger
from tests.servers.postgres import postgres_server

ROUND_SECONDS = 0.1
ROUNDS = 20
CONCURRENCY = 32
_ids = itertools.count()


def _rid(tag: str) -> bytes:
    return f"{tag}-{next(_ids)}".encode()


def _insert(table: str) -> str:
    """The raw statement as a host would write it by hand."""
    return (
        f"INSERT INTO {table} (namespace, request_id, token) VALUES (%s, %s, %s) "
        "ON CONFLICT (namespace, request_id) DO NOTHING"
    )


def _select(table: str) -> str:
    return f"SELECT true FROM {table} WHERE namespace = %s AND request_id = %s"


def _threads(op: Callable[[], object], workers: int) -> float:
    """Operations per second with ``workers`` threads for one round."""
    counts = [0] * workers
    barrier = threading.Barrier(workers + 1)
    stop_at = [0.0]

    def work(slot: int) -> None:
        barrier.wait()
        n = 0
        while time.monotonic() < stop_at[0]:
            op()
            n += 1
        counts[slot] = n

    threads = [threading.Thread(target=work, args=(i,)) for i in range(workers)]
    for t in threads:
        t.start()
    stop_at[0] = time.monotonic() + ROUND_SECONDS
    barrier.wait()
    for t in threads:
        t.join(timeout=30)
    return sum(counts) / ROUND_SECONDS


async def _tasks(op: Callable[[], Awaitable[object]], workers: int) -> float:
    stop_at = time.monotonic() + ROUND_SECONDS

    async def work() -> int:
        n = 0
        while time.monotonic() < stop_at:
            await op()
            n += 1
        return n

    counts = await asyncio.gather(*(work() for _ in range(workers)))
    return sum(counts) / ROUND_SECONDS


def _report(name: str, ours: list[float], raw: list[float], workers: int) -> None:
    """Mean throughputs, wall microseconds per call and worker, and the median of the
    per-round ratios: rounds are paired (ours and raw back to back, under the same
    machine load), so the median resists a noisy neighbor better than the ratio of
    means."""
    o, r = statistics.mean(ours), statistics.mean(raw)
    paired = statistics.median(a / b for a, b in zip(ours, raw, strict=True))
    us_o, us_r = workers * 1e6 / o, workers * 1e6 / r
    print(
        f"{name:<30} ours {o:6.0f}/s {us_o:6.0f} us/call  raw {r:6.0f}/s {us_r:6.0f} us/call"
        f"  ratio {o / r:4.2f}  median {paired:4.2f}"
    )


def _sync_case(name: str, ledger: Any, pool: ConnectionPool[Any], table: str, n: int) -> None:
    insert, select = _insert(table), _select(table)
    ns = b"default"

    def raw_spend() -> None:
        with pool.connection() as conn:
            conn.execute(insert, (ns, _rid("raw"), os.urandom(16)))
            if not conn.autocommit:
                conn.commit()

    def raw_read() -> None:
        with pool.connection() as conn:
            conn.execute(select, (ns, b"raw-1")).fetchone()
            if not conn.autocommit:
                conn.commit()

    for label, ours_op, raw_op in (
        ("spend", lambda: ledger.spend(_rid("ours").decode()), raw_spend),
        ("is_spent", lambda: ledger.is_spent("ours-1"), raw_read),
    ):
        ours, raw = [], []
        for i in range(ROUNDS):  # ABBA order, so going first or second favors neither
            for side in (0, 1) if i % 2 == 0 else (1, 0):
                if side == 0:
                    ours.append(_threads(ours_op, n))
                else:
                    raw.append(_threads(raw_op, n))
        _report(f"{name} {label} sync x{n}", ours, raw, n)


async def _async_case(name: str, ledger: Any, pool: AsyncConnectionPool[Any], table: str) -> None:
    insert, select = _insert(table), _select(table)
    ns = b"default"

    async def raw_spend() -> None:
        async with pool.connection() as conn:
            await conn.execute(insert, (ns, _rid("raw"), os.urandom(16)))
            if not conn.autocommit:
                await conn.commit()

    async def raw_read() -> None:
        async with pool.connection() as conn:
            await (await conn.execute(select, (ns, b"raw-1"))).fetchone()
            if not conn.autocommit:
                await conn.commit()

    async def ours_spend() -> None:
        await ledger.spend(_rid("ours").decode())

    async def ours_read() -> None:
        await ledger.is_spent("ours-1")

    for label, ours_op, raw_op in (
        ("spend", ours_spend, raw_spend),
        ("is_spent", ours_read, raw_read),
    ):
        ours, raw = [], []
        for i in range(ROUNDS):  # ABBA order, so going first or second favors neither
            for side in (0, 1) if i % 2 == 0 else (1, 0):
                if side == 0:
                    ours.append(await _tasks(ours_op, CONCURRENCY))
                else:
                    raw.append(await _tasks(raw_op, CONCURRENCY))
        _report(f"{name} {label} async x{CONCURRENCY}", ours, raw, CONCURRENCY)


async def _async_main(url: str, own_only: bool = False) -> None:
    own = await open_async_ledger(url, table="bench_async", pool_max=CONCURRENCY)
    assert isinstance(own, AsyncPostgresLedger)
    try:
        await _async_case("own pool", own, own._pool, "bench_async")  # the ledger's pool
    finally:
        await own.aclose()
    if own_only:
        return
    host: AsyncConnectionPool[Any] = AsyncConnectionPool(
        url, min_size=CONCURRENCY, max_size=CONCURRENCY, open=False
    )
    await host.open(wait=True)
    try:
        ledger = await AsyncPostgresLedger.from_pool(host, table="bench_async_host")
        await _async_case("host pool", ledger, host, "bench_async_host")
    finally:
        await host.close()


def _per_call(url: str, rounds: int = 30, calls: int = 1000) -> None:
    """Per-spend client cost at one thread: paired rounds, medians."""
    own = open_ledger(url, table="bench_per_call", pool_max=2)
    assert isinstance(own, PostgresLedger)
    pool, insert = own._pool, _insert("bench_per_call")

    def raw() -> None:
        with pool.connection() as conn:
            conn.execute(insert, (b"default", _rid("raw"), os.urandom(16)))

    def ours() -> None:
        own.spend(_rid("ours").decode())

    def timed(op: Callable[[], None]) -> tuple[float, float]:
        wall, cpu = time.perf_counter_ns(), time.thread_time_ns()
        for _ in range(calls):
            op()
        return (
            (time.perf_counter_ns() - wall) / calls / 1e3,
            (time.thread_time_ns() - cpu) / calls / 1e3,
        )

    try:
        for _ in range(calls):  # warm up: pool, prepared statements
            raw()
            ours()
        got: dict[str, list[tuple[float, float]]] = {"ours": [], "raw": []}
        for i in range(rounds):
            sides = (("ours", ours), ("raw", raw))
            for side, op in sides if i % 2 == 0 else sides[::-1]:
                got[side].append(timed(op))
    finally:
        own.close()
    for k, what in ((0, "wall"), (1, "cpu")):
        o = statistics.median(x[k] for x in got["ours"])
        r = statistics.median(x[k] for x in got["raw"])
        diff = statistics.median(a[k] - b[k] for a, b in zip(got["ours"], got["raw"], strict=True))
        ratio = statistics.median(b[k] / a[k] for a, b in zip(got["ours"], got["raw"], strict=True))
        print(
            f"spend x1 {what:<4} ours {o:6.1f} us  raw {r:6.1f} us  "
            f"ours-raw {diff:5.1f} us  ratio {ratio:4.2f}"
        )


def _guard_cost(url: str, rounds: int = 30, calls: int = 1000) -> None:
    """What the in-statement guard costs per call: raw vs genesis-only vs full guard."""
    from ledger_postgres.commands import Guard, Statements
    from ledger_postgres.options import PgConfig

    table = "bench_guard"
    own = open_ledger(url, table=table)
    assert isinstance(own, PostgresLedger)
    guard = own._st.guard
    own.close()
    assert guard is not None
    config = PgConfig(table=table)
    genesis_only = Statements(config, Guard(guard.genesis, guard.table_oid, durable=False))
    full = Statements(config, Guard(guard.genesis, guard.table_oid, durable=True))
    raw_insert, raw_select = _insert(table).encode(), _select(table).encode()
    ns = b"default"
    cases: dict[str, Callable[[psycopg.Connection[Any]], object]] = {
        "spend raw": lambda c: c.execute(raw_insert, (ns, _rid("r"), b"t" * 16)),
        "spend genesis": lambda c: c.execute(genesis_only.spend, (ns, _rid("g"), b"t" * 16)),
        "spend full": lambda c: c.execute(full.spend, (ns, _rid("f"), b"t" * 16)),
        "is_spent raw": lambda c: c.execute(raw_select, (ns, b"x")).fetchone(),
        # A read proves the genesis only, whether the ledger proves or not.
        "is_spent genesis": lambda c: c.execute(full.is_spent, (ns, b"x")).fetchone(),
    }
    got: dict[str, list[float]] = {name: [] for name in cases}
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET synchronous_commit = off")
        for op in cases.values():  # warm up, and let psycopg prepare every statement
            for _ in range(20):
                op(conn)
        names = list(cases)
        for i in range(rounds):
            for name in names if i % 2 == 0 else names[::-1]:
                started = time.perf_counter_ns()
                for _ in range(calls):
                    cases[name](conn)
                got[name].append((time.perf_counter_ns() - started) / calls / 1e3)
    for name, times in got.items():
        base = got[name.split()[0] + " raw"]
        extra = statistics.median(a - b for a, b in zip(times, base, strict=True))
        print(f"{name:<18} {statistics.median(times):6.1f} us/call  vs raw {extra:+5.1f} us")


def _set_fsync(url: str, off: bool) -> None:
    """Server-wide ``fsync`` for the client-cost mode (needs a superuser)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ALTER SYSTEM SET fsync = off" if off else "ALTER SYSTEM RESET fsync")
        conn.execute("SELECT pg_reload_conf()")


def main() -> None:
    per_call = "--per-call" in sys.argv[1:]
    guard_cost = "--guard-cost" in sys.argv[1:]
    client_cost = per_call or "--client-cost" in sys.argv[1:]
    started = time.monotonic()
    with postgres_server() as server:
        url = server.url + "?sslmode=disable"  # the ledger, not TLS, is measured
        if client_cost:
            _set_fsync(url, off=True)
        try:
            if "--own" in sys.argv[1:]:
                _own_pool(url, _repeat())
            elif per_call:
                _per_call(url)
            elif guard_cost:
                _guard_cost(url)
            else:
                _measure(url)
        finally:
            if client_cost:
                _set_fsync(url, off=False)
    took = time.monotonic() - started
    mode = "client cost: server fsync off" if client_cost else "durable: server defaults"
    print(f"({mode}; ratio = ours/raw throughput, rounds alternated; {took:.0f} s in all)")


def _repeat() -> int:
    args = sys.argv[1:]
    return int(args[args.index("--repeat") + 1]) if "--repeat" in args else 3


def _own_pool(url: str, repeat: int) -> None:
    """Issue 16's target: the ledger's own pool at 32 threads and 32 tasks, repeated."""
    for _ in range(repeat):
        own = open_ledger(url, table="bench_sync", pool_max=CONCURRENCY)
        assert isinstance(own, PostgresLedger)
        try:
            _sync_case("own pool", own, own._pool, "bench_sync", CONCURRENCY)
        finally:
            own.close()
        asyncio.run(_async_main(url, own_only=True))


def _measure(url: str) -> None:
    own = open_ledger(url, table="bench_sync", pool_max=CONCURRENCY)
    assert isinstance(own, PostgresLedger)
    try:
        for n in (1, CONCURRENCY):
            _sync_case("own pool", own, own._pool, "bench_sync", n)
    finally:
        own.close()
    with ConnectionPool(url, min_size=CONCURRENCY, max_size=CONCURRENCY) as host:
        host.wait()
        ledger = PostgresLedger.from_pool(host, table="bench_sync_host")
        _sync_case("host pool", ledger, host, "bench_sync_host", CONCURRENCY)
    asyncio.run(_async_main(url))


if __name__ == "__main__":
    main()
