"""DynamoDB: our spend against the raw conditional ``put_item`` on the same client.

One run, interleaved rounds (the median decides), on dynalite with an on-disk store (or
``LEDGER_TEST_DYNAMODB_URL``): sync 1 thread, sync 32 threads, async 64 tasks; ``is_spent``
against a consistent ``get_item``; and, when installed, the closest peers on the same
server: cachelib's ``DynamoDbCache.add`` and AWS Lambda Powertools' idempotency (its
conditional put and the save that follows). Ratios are ours / theirs.

    python -m bench.bench_dynamodb [--seconds 1.5] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import statistics
import time
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from typing import Any

from ledger_core import open_async_ledger, open_ledger
from ledger_dynamodb import AsyncDynamoDBLedger, DynamoDBLedger, commands
from tests.dynamodb import tools
from tests.servers import dynamodb as servers

TABLE = "decision-ledger-bench"
_counter = itertools.count()


ATTEMPT_KEY = "attempt-key-for-the-bench-0123456789"


def fresh() -> str:
    return f"b-{os.getpid()}-{next(_counter)}"


@contextmanager
def _url() -> Iterator[str]:
    with servers.dynamodb_target(TABLE) as target:
        yield target.url


def _sync_rate(op: Callable[[str], object], threads: int, seconds: float) -> float:
    """Calls per second of ``op`` on fresh ids from ``threads`` threads for ``seconds``."""
    deadline = time.perf_counter() + seconds

    def worker(_: int) -> int:
        done = 0
        while time.perf_counter() < deadline:
            op(fresh())
            done += 1
        return done

    start = time.perf_counter()
    if threads == 1:
        total = worker(0)
    else:
        with ThreadPoolExecutor(threads) as pool:
            total = sum(pool.map(worker, range(threads)))
    return total / (time.perf_counter() - start)


async def _async_rate(op: Callable[[str], Awaitable[object]], tasks: int, seconds: float) -> float:
    deadline = time.perf_counter() + seconds
    done = 0

    async def worker() -> None:
        nonlocal done
        while time.perf_counter() < deadline:
            await op(fresh())
            done += 1

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(tasks)))
    return done / (time.perf_counter() - start)


def _runner(op: Callable[[str], object], threads: int, seconds: float) -> Callable[[], float]:
    return lambda: _sync_rate(op, threads, seconds)


def _interleave(sides: dict[str, Callable[[], float]], rounds: int) -> dict[str, float]:
    rates: dict[str, list[float]] = {name: [] for name in sides}
    names = list(sides)
    for r in range(rounds):
        for name in names if r % 2 == 0 else reversed(names):
            rates[name].append(sides[name]())
    return {name: statistics.median(values) for name, values in rates.items()}


def _raw_put(ledger: DynamoDBLedger | AsyncDynamoDBLedger) -> tuple[str, str]:
    return ledger._session.table, ledger._session.namespace


def sync_sides(ledger: DynamoDBLedger) -> dict[str, Callable[[str], object]]:
    table, namespace = _raw_put(ledger)
    client = ledger._client
    token = b"t" * 16

    def raw_put(rid: str) -> object:
        call = commands.put_new(table, commands.record_key(namespace + "-raw", rid.encode()), token)
        return client.put_item(**call.params)

    def raw_get(rid: str) -> object:
        call = commands.exists(table, commands.record_key(namespace + "-raw", rid.encode()))
        return client.get_item(**call.params)

    def spend_as(rid: str) -> object:
        return ledger.spend_as(rid, ATTEMPT_KEY)

    return {
        "ledger spend": ledger.spend,
        "ledger spend_as": spend_as,
        "raw put_item": raw_put,
        "ledger is_spent": ledger.is_spent,
        "raw get_item": raw_get,
    }


def peers(url: str) -> dict[str, Callable[[str], object]]:
    """cachelib's add and Powertools' idempotent function, when installed."""
    found: dict[str, Callable[[str], object]] = {}
    _, query = tools.url_parts(url)
    where: dict[str, Any] = {
        "region_name": query.get("region"),
        "endpoint_url": query.get("endpoint_url"),
    }
    try:
        from cachelib.dynamodb import DynamoDbCache
    except ImportError:
        pass
    else:
        import boto3

        # Made here: cachelib would create it with a TTL, which dynalite cannot set.
        _ensure_string_table(
            boto3.session.Session().client("dynamodb", **where), "bench-cachelib", "cache_key"
        )
        cache = DynamoDbCache(table_name="bench-cachelib", default_timeout=0, **where)

        def cachelib_add(rid: str) -> object:
            return cache.add(rid, 1)

        found["cachelib add"] = cachelib_add
    try:
        import boto3
        from aws_lambda_powertools.utilities.idempotency import (
            DynamoDBPersistenceLayer,
            IdempotencyConfig,
            idempotent_function,
        )
    except ImportError:
        pass
    else:
        client: Any = boto3.session.Session().client("dynamodb", **where)
        _ensure_string_table(client, "bench-powertools", "id")
        layer = DynamoDBPersistenceLayer(table_name="bench-powertools", boto3_client=client)

        @idempotent_function(  # type: ignore[untyped-decorator]
            data_keyword_argument="rid", persistence_store=layer, config=IdempotencyConfig()
        )
        def run_once(rid: str) -> int:
            return 1

        def powertools(rid: str) -> object:
            return run_once(rid=rid)

        found["powertools idempotent"] = powertools
    return found


def _ensure_string_table(client: Any, table: str, key: str) -> None:
    with suppress(client.exceptions.ResourceInUseException):  # it exists: fine
        client.create_table(
            TableName=table,
            KeySchema=[{"AttributeName": key, "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": key, "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
    while client.describe_table(TableName=table)["Table"]["TableStatus"] != "ACTIVE":
        time.sleep(0.1)


async def async_rates(url: str, seconds: float, rounds: int) -> dict[str, float]:
    ledger = await open_async_ledger(url, namespace="bench-async", **tools.ledger_options(url))
    assert isinstance(ledger, AsyncDynamoDBLedger)
    table, namespace = _raw_put(ledger)
    client = ledger._client
    token = b"t" * 16

    async def raw_put(rid: str) -> object:
        key = commands.record_key(namespace + "-raw", rid.encode())
        return await client.put_item(**commands.put_new(table, key, token).params)

    sides = {"ledger spend": ledger.spend, "raw put_item": raw_put}
    rates: dict[str, list[float]] = {name: [] for name in sides}
    try:
        for r in range(rounds):
            for name in list(sides) if r % 2 == 0 else list(reversed(sides)):
                rates[name].append(await _async_rate(sides[name], 64, seconds))
    finally:
        await ledger.aclose()
    return {name: statistics.median(v) for name, v in rates.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1.5)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with _url() as url:
        ledger = open_ledger(url, namespace="bench", **tools.ledger_options(url))
        assert isinstance(ledger, DynamoDBLedger)
        sides = sync_sides(ledger)
        sides.update(peers(url))
        print(f"DynamoDB bench on {tools.url_parts(url)[1].get('endpoint_url', 'AWS')}")
        for threads in (1, 32):
            rates = _interleave(
                {n: _runner(op, threads, args.seconds) for n, op in sides.items()}, args.rounds
            )
            for name, rate in rates.items():
                print(f"  sync {threads:>2} thread(s)  {name:<24} {rate:>9,.0f}/s")
            base = rates["ledger spend"]
            for other in ("raw put_item", "cachelib add", "powertools idempotent"):
                if other in rates:
                    print(f"  sync {threads:>2}: spend / {other:<22} {base / rates[other]:.3f}")
            print(
                f"  sync {threads:>2}: spend_as / raw put_item    "
                f"{rates['ledger spend_as'] / rates['raw put_item']:.3f}"
            )
            print(
                f"  sync {threads:>2}: is_spent / get_item       "
                f"{rates['ledger is_spent'] / rates['raw get_item']:.3f}"
            )
        ledger.close()
        arates = asyncio.run(async_rates(url, args.seconds, args.rounds))
        for name, rate in arates.items():
            print(f"  async 64 tasks  {name:<24} {rate:>9,.0f}/s")
        print(
            f"  async 64: spend / raw put_item       "
            f"{arates['ledger spend'] / arates['raw put_item']:.3f}"
        )


if __name__ == "__main__":
    main()
