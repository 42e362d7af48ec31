"""The Redis ledger against real servers: plain and Cluster, sync and async (C9)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import redis

from ledger_core import open_async_ledger, open_ledger
from ledger_core.errors import InvalidLedgerURL, LedgerClosed, LedgerUnavailable
from ledger_core.ids import ledger_key
from ledger_redis import commands
from tests.flavors import Flavored

FLAVORS = ["sync", "async"]


@pytest.fixture(params=["plain", "cluster"])
def url(request: pytest.FixtureRequest) -> str:
    name = "redis_url" if request.param == "plain" else "cluster_url"
    value: str = request.getfixturevalue(name)
    return value


@pytest.fixture(params=FLAVORS)
def ledger(request: pytest.FixtureRequest, url: str, namespace: str) -> Iterator[Flavored]:
    with Flavored(request.param, url, namespace=namespace) as opened:
        yield opened


def _raw(url: str) -> redis.Redis | redis.cluster.RedisCluster:
    if url.startswith("redis+cluster://"):
        return redis.cluster.RedisCluster.from_url("redis://" + url.split("://", 1)[1])
    return redis.Redis.from_url(url)


def test_spend_once_then_read(ledger: Flavored) -> None:
    assert ledger.is_spent("r1") is False
    assert ledger.is_spent("r1") is False  # reading never records (C3)
    assert ledger.spend("r1") is True
    assert ledger.spend("r1") is False
    assert ledger.is_spent("r1") is True
    assert ledger.store_id is not None


DANGEROUS = [
    "*",
    "a?b",
    "[ab]",
    "{tag}x",
    "{tag}y",
    "{}",
    "}{",
    "line\nbreak\r\n",
    "nul\x00:colon",
    "caf\u00e9",
    "cafe\u0301",  # the same word, NFD: a different id
    "CAFE\u0301",
    " spaced ",
    "x" * 1024,
    "\U0001f600" * 256,  # 1024 UTF-8 bytes
]


def test_dangerous_ids_are_data(ledger: Flavored, url: str) -> None:
    for request_id in DANGEROUS:
        assert ledger.spend(request_id) is True, request_id
    for request_id in DANGEROUS:
        assert ledger.is_spent(request_id) is True
        assert ledger.spend(request_id) is False
    assert ledger.is_spent("tag") is False
    assert ledger.is_spent("a") is False
    client = _raw(url)
    try:
        namespace = ledger.describe().namespace
        keys = commands.Keys(namespace, cluster=url.startswith("redis+cluster://"))
        for request_id in DANGEROUS:
            key = keys.record(request_id.encode())
            if not keys.cluster:
                assert key == commands.RECORD_PREFIX + ledger_key(namespace, request_id.encode())
            assert client.exists(key) == 1
            assert client.ttl(key) == -1  # never an expiry (C2)
        assert client.ttl(keys.genesis) == -1
    finally:
        client.close()


@pytest.mark.parametrize("flavor", FLAVORS)
def test_namespaces_are_isolated(flavor: str, url: str) -> None:
    with Flavored(flavor, url, namespace="a") as a, Flavored(flavor, url, namespace="a:b") as ab:
        assert a.store_id != ab.store_id
        marker = f"c-{flavor}-{id(a)}"
        assert a.spend("b:" + marker) is True
        assert ab.is_spent(marker) is False
        assert ab.spend(marker) is True


def test_store_id_is_one_value_per_store(url: str, namespace: str) -> None:
    with (
        Flavored("sync", url, namespace=namespace) as one,
        Flavored("async", url, namespace=namespace) as two,
        Flavored("sync", url, namespace=namespace + "-other") as other,
    ):
        assert one.store_id == two.store_id
        assert one.store_id is not None
        assert other.store_id is not None
        assert one.store_id != other.store_id
        assert one.spend("shared") is True
        assert two.spend("shared") is False


def test_another_database_is_another_store(redis_url: str, namespace: str) -> None:
    base = redis_url.rsplit("/", 1)[0]
    with (
        Flavored("sync", base + "/0", namespace=namespace) as db0,
        Flavored("sync", base + "/3", namespace=namespace) as db3,
    ):
        assert db0.store_id != db3.store_id


def test_threads_race_one_winner(url: str, namespace: str) -> None:
    ledger: Any = open_ledger(url, namespace=namespace)
    workers = 16
    barrier = threading.Barrier(workers, timeout=10)

    def race(_: int) -> list[bool]:
        results = []
        for round_ in range(20):
            barrier.wait()
            results.append(ledger.spend(f"race-{round_}"))
        return results

    try:
        with ThreadPoolExecutor(workers) as pool:
            outcomes = list(pool.map(race, range(workers)))
    finally:
        ledger.close()
    for round_ in range(20):
        assert sum(o[round_] for o in outcomes) == 1


def test_tasks_race_one_winner(url: str, namespace: str) -> None:
    async def main() -> list[list[bool]]:
        ledgers: list[Any] = [await open_async_ledger(url, namespace=namespace) for _ in range(2)]
        try:
            rounds = []
            for round_ in range(10):
                calls = [ledgers[i % 2].spend(f"task-race-{round_}") for i in range(64)]
                rounds.append(list(await asyncio.gather(*calls)))
            return rounds
        finally:
            for one in ledgers:
                await one.aclose()

    for results in asyncio.run(main()):
        assert results.count(True) == 1
        assert results.count(False) == 63


@pytest.mark.parametrize("flavor", FLAVORS)
def test_closed_ledger_refuses(flavor: str, url: str) -> None:
    ledger = Flavored(flavor, url)
    ledger.run(ledger.ledger.aclose() if flavor == "async" else ledger.ledger.close())
    with pytest.raises(LedgerClosed):
        ledger.spend("after-close")
    with pytest.raises(LedgerClosed):
        ledger.is_spent("after-close")
    ledger.close()  # twice is fine


def test_unknown_options_are_refused(redis_url: str) -> None:
    with pytest.raises(InvalidLedgerURL, match="bogus"):
        open_ledger(redis_url + "?bogus=1")
    with pytest.raises(InvalidLedgerURL, match="URL query"):
        open_ledger(redis_url, db="2")


def test_a_cluster_node_needs_the_cluster_scheme(cluster_url: str) -> None:
    node = "redis://" + cluster_url.split("://", 1)[1]
    with pytest.raises(InvalidLedgerURL, match=r"redis\+cluster://"):
        open_ledger(node)


def test_unreachable_server_is_unavailable() -> None:
    from tests.servers.common import free_port

    url = f"redis://127.0.0.1:{free_port()}/0?connect_timeout=1"
    with pytest.raises(LedgerUnavailable) as caught:
        open_ledger(url)
    assert type(caught.value) is LedgerUnavailable  # refused before sending: not ambiguous


@pytest.mark.parametrize("flavor", FLAVORS)
def test_unix_socket_url(flavor: str, tmp_path: Any) -> None:
    from tests.servers import redis as servers

    socket_path = tmp_path / "redis.sock"
    try:
        manager = servers.local_redis((*servers.PLAIN, "--unixsocket", str(socket_path)))
        manager.__enter__()
    except servers.ServerUnavailable as exc:
        pytest.skip(str(exc))
    try:
        with Flavored(flavor, f"unix://{socket_path}?namespace=sock") as ledger:
            assert ledger.describe().location.startswith("unix://")
            assert ledger.store_id is not None
            assert ledger.spend("over-unix") is True
            assert ledger.spend("over-unix") is False
    finally:
        manager.__exit__(None, None, None)


@pytest.mark.parametrize("flavor", FLAVORS)
def test_tls_url(flavor: str) -> None:
    from tests.servers import redis as servers

    try:
        manager = servers.local_tls_redis()
        tls = manager.__enter__()
    except servers.ServerUnavailable as exc:
        pytest.skip(str(exc))
    try:
        with Flavored(flavor, tls.url, namespace="tls") as ledger:
            assert ledger.describe().location.startswith("rediss://")
            assert ledger.spend("over-tls") is True
            assert ledger.spend("over-tls") is False
        with Flavored(flavor, f"redis://127.0.0.1:{tls.server.port}/0", namespace="tls") as plain:
            assert plain.store_id == ledger.store_id  # one data set, two listeners
    finally:
        manager.__exit__(None, None, None)


def test_a_small_pool_makes_callers_wait_not_fail(redis_url: str, namespace: str) -> None:
    async def main() -> list[bool]:
        ledger: Any = await open_async_ledger(redis_url + "?max_connections=4", namespace=namespace)
        try:
            return list(await asyncio.gather(*(ledger.spend(f"p-{i % 50}") for i in range(300))))
        finally:
            await ledger.aclose()

    results = asyncio.run(main())
    assert results.count(True) == 50
    assert results.count(False) == 250
