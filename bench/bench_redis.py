"""Redis ledger vs the raw driver call, in one run: ``python -m bench.bench_redis``.

Starts its own ``redis-server`` (like the tests) unless ``LEDGER_TEST_REDIS_URL`` is
set, then measures, interleaved round by round so drift hits every contender alike:

* sync, one connection: ``RedisLedger.spend`` / ``is_spent`` against redis-py's
  ``set(key, value, nx=True)`` / ``exists`` on the same client, plus ``setnx``, the
  ledger's genesis-proving spend script sent raw (``evalsha``), and cachelib's
  ``RedisCache.add`` (no expiry) when cachelib is installed;
* async, 64 concurrent tasks: ``AsyncRedisLedger.spend`` against ``set(nx=True)``.

Every spend writes a fresh key (the winning path). Prints ops/s and ours/raw as the
median of per-round ratios (back-to-back runs, robust to a busy shared machine).
Bounded: a fixed number of operations, and a hard stop at ``BUDGET`` seconds.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import redis
import redis.asyncio

from ledger_redis import AsyncRedisLedger, RedisLedger
from tests.servers import redis as servers

ROUNDS = 21  # short, interleaved rounds: a noisy neighbour hits every contender alike
SYNC_OPS = 500
ASYNC_OPS = 1280
TASKS = 64
BUDGET = 45.0  # seconds


@contextmanager
def _server() -> Iterator[str]:
    url = os.environ.get("LEDGER_TEST_REDIS_URL")
    if url:
        yield url
        return
    with servers.local_redis(("--save", "", "--appendonly", "no")) as server:
        yield server.url


def _rate(ops: int, run: Callable[[int], None]) -> float:
    started = time.perf_counter()
    run(ops)
    return ops / (time.perf_counter() - started)


def _sync_contenders(client: redis.Redis, ledger: RedisLedger) -> dict[str, Callable[[int], None]]:
    counter = iter(range(10**9))
    token = os.urandom(16)

    def ids(n: int) -> list[str]:
        base = next(counter)
        return [f"bench-{base}-{i}" for i in range(n)]

    def raw_set_nx(n: int) -> None:
        for rid in ids(n):
            client.set(b"raw:" + rid.encode(), token, nx=True)

    def raw_setnx(n: int) -> None:
        for rid in ids(n):
            client.setnx(b"raw:" + rid.encode(), token)

    # The ledger's own genesis-proving script, sent raw: isolates what the script
    # costs the server (vs SETNX) from what the ledger's client path costs.
    plan = ledger._plan
    sha = client.script_load(plan.spend_script.body)

    def raw_script(n: int) -> None:
        for rid in ids(n):
            key = plan.keys.record(b"raw:" + rid.encode())
            client.evalsha(sha, 2, plan.keys.genesis, key, plan.genesis, token)

    def ledger_spend(n: int) -> None:
        for rid in ids(n):
            ledger.spend(rid)

    def raw_exists(n: int) -> None:
        for rid in ids(n):
            client.exists(b"raw:" + rid.encode())

    def ledger_is_spent(n: int) -> None:
        for rid in ids(n):
            ledger.is_spent(rid)

    contenders: dict[str, Callable[[int], None]] = {
        "raw set(nx=True)": raw_set_nx,
        "raw setnx": raw_setnx,
        "raw evalsha script": raw_script,
        "ledger spend": ledger_spend,
        "raw exists": raw_exists,
        "ledger is_spent": ledger_is_spent,
    }
    try:
        from cachelib.redis import RedisCache
    except ImportError:
        return contenders
    cache = RedisCache(host=client, key_prefix="cachelib:", default_timeout=0)

    def cachelib_add(n: int) -> None:
        for rid in ids(n):
            cache.add(rid, token)

    contenders["cachelib add"] = cachelib_add
    return contenders


async def _async_rates(url: str, deadline: float) -> dict[str, list[float]]:
    client = redis.asyncio.Redis.from_url(url)
    ledger = await AsyncRedisLedger.from_client(client, namespace="bench-async")
    token = os.urandom(16)
    counter = iter(range(10**9))

    async def fan_out(call: Callable[[str], Awaitable[Any]]) -> None:
        base = next(counter)
        queue = iter(range(ASYNC_OPS))

        async def worker() -> None:
            for i in queue:
                await call(f"bench-{base}-{i}")

        await asyncio.gather(*(worker() for _ in range(TASKS)))

    async def raw(rid: str) -> None:
        await client.set(b"raw:" + rid.encode(), token, nx=True)

    contenders: dict[str, Callable[[str], Awaitable[Any]]] = {
        "raw set(nx=True)": raw,
        "ledger spend": ledger.spend,
    }
    rates: dict[str, list[float]] = {name: [] for name in contenders}
    await fan_out(raw)  # open the 64 connections before timing
    for _ in range(ROUNDS):
        for name, call in contenders.items():
            started = time.perf_counter()
            await fan_out(call)
            rates[name].append(ASYNC_OPS / (time.perf_counter() - started))
        if time.monotonic() > deadline:
            break
    await ledger.aclose()
    await client.aclose()
    return rates


def _report(title: str, rates: dict[str, list[float]], pairs: list[tuple[str, str]]) -> None:
    """Throughputs (median and best round), and ours/theirs as the median of the
    per-round ratios: each ratio compares runs made back to back, so load that comes
    and goes on a shared machine cancels out."""
    print(f"\n{title}")
    for name, values in rates.items():
        if values:
            print(
                f"  {name:<20} median {statistics.median(values):>9,.0f} ops/s   "
                f"best {max(values):>9,.0f} ops/s   ({len(values)} rounds)"
            )
    for ours, theirs in pairs:
        if rates.get(ours) and rates.get(theirs):
            paired = [a / b for a, b in zip(rates[ours], rates[theirs], strict=True)]
            print(
                f"  ratio {ours} / {theirs}: {statistics.median(paired):.3f} "
                f"(best-round ratio {max(rates[ours]) / max(rates[theirs]):.3f})"
            )


def main() -> None:
    deadline = time.monotonic() + BUDGET
    with _server() as url:
        client = redis.Redis.from_url(url, single_connection_client=False)
        ledger = RedisLedger.from_client(client, namespace="bench")
        contenders = _sync_contenders(client, ledger)
        for run in contenders.values():
            run(300)  # warm up
        rates: dict[str, list[float]] = {name: [] for name in contenders}
        for _ in range(ROUNDS):
            for name, run in contenders.items():
                rates[name].append(_rate(SYNC_OPS, run))
            if time.monotonic() > deadline:
                break
        ledger.close()
        client.close()
        async_rates = asyncio.run(_async_rates(url, deadline))
    _report(
        "sync, one connection",
        rates,
        [
            ("ledger spend", "raw set(nx=True)"),
            ("ledger spend", "raw setnx"),
            ("raw evalsha script", "raw setnx"),
            ("ledger spend", "raw evalsha script"),
            ("ledger spend", "cachelib add"),
            ("ledger is_spent", "raw exists"),
        ],
    )
    _report(
        f"async, {TASKS} concurrent tasks",
        async_rates,
        [("ledger spend", "raw set(nx=True)")],
    )


if __name__ == "__main__":
    main()
