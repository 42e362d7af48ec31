"""``namespaces()`` on Redis: every namespace with a genesis in the key space, each once,
streamed by ``SCAN`` (every master of a Cluster), sync and async."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import redis

from ledger_core import open_ledger
from ledger_core.errors import LedgerClosed, UnsafeStoreConfig
from ledger_redis import commands
from tests.flavors import Flavored
from tests.servers import redis as servers

# Namespaces a naive SCAN MATCH would glob, split or mis-decode.
ODD = ["*", "a?b", "[ab]", "\\", "{tag}", "}{", "with space", "caf\u00e9", "x" * 256, "1:a:b"]


@pytest.fixture(params=["sync", "async"])
def flavor(request: pytest.FixtureRequest) -> str:
    value: str = request.param
    return value


async def _drain(names: AsyncIterator[str]) -> list[str]:
    return [name async for name in names]


def _namespaces(ledger: Flavored, **options: Any) -> list[str]:
    """The whole listing of a sync or an async ledger."""
    listing = ledger.ledger.namespaces(**options)
    names: list[str] = list(listing) if ledger.loop is None else ledger.run(_drain(listing))
    return names


@pytest.fixture
def private_server() -> Iterator[servers.RedisServer]:
    """A server of this test's own, so the listing can be compared exactly."""
    try:
        with servers.local_redis(servers.PLAIN) as server:
            yield server
    except servers.ServerUnavailable as exc:
        pytest.skip(str(exc))


def test_every_namespace_once_and_nothing_else(
    private_server: servers.RedisServer, flavor: str
) -> None:
    url = private_server.url
    names = ODD + [f"ns-{i}" for i in range(120)]
    for name in names:
        with Flavored("sync", url, namespace=name) as ledger:
            assert ledger.spend("x") is True
    client = redis.Redis.from_url(url)
    client.set(b"{}dl-other:" + b"n", b"1")  # look-alikes the pattern must not match
    client.set(b"{}dl-genesisX", b"1")
    client.set(b"unrelated", b"1")
    client.close()
    with Flavored(flavor, url, namespace="ns-0") as ledger:
        for count in (1, 7, 1000):
            listed = _namespaces(ledger, count=count)
            assert sorted(listed) == sorted(names), count
            assert len(listed) == len(names)


def test_cluster_lists_every_master(cluster_url: str, flavor: str, namespace: str) -> None:
    names = [f"{namespace}-{i}" for i in range(40)] + [namespace + n for n in ODD[:5]]
    for name in names:
        with Flavored("sync", cluster_url, namespace=name):
            pass  # opening writes the genesis; no spend needed
    with Flavored(flavor, cluster_url, namespace=names[0]) as ledger:
        listed = _namespaces(ledger, count=5)
    assert set(names) <= set(listed)
    assert len(listed) == len(set(listed))
    client = redis.cluster.RedisCluster.from_url("redis://" + cluster_url.split("://", 1)[1])
    try:
        node: Any = client.get_node_from_key
        nodes = {node(commands.Keys(n, True).genesis).name for n in names}
    finally:
        client.close()
    assert len(nodes) > 1  # the namespaces really live on several masters


def test_a_cluster_look_alike_is_not_a_namespace(
    cluster_url: str, flavor: str, namespace: str
) -> None:
    client = redis.cluster.RedisCluster.from_url("redis://" + cluster_url.split("://", 1)[1])
    fake = b"{dl-0000000000000000}dl-genesis:" + namespace.encode() + b"-fake"
    client.set(fake, b"0" * 32)
    try:
        with Flavored(flavor, cluster_url, namespace=namespace) as ledger:
            listed = _namespaces(ledger)
        assert namespace in listed
        assert namespace + "-fake" not in listed
    finally:
        client.delete(fake)
        client.close()


def test_a_foreign_genesis_key_is_refused(private_server: servers.RedisServer) -> None:
    client = redis.Redis.from_url(private_server.url)
    client.set(commands.GENESIS_PREFIX + b"\xc3(", b"0" * 32)  # no UTF-8 namespace
    client.close()
    ledger: Any = open_ledger(private_server.url, namespace="mine")
    try:
        with pytest.raises(UnsafeStoreConfig, match="namespace"):
            list(ledger.namespaces())
    finally:
        ledger.close()


def test_a_closed_ledger_lists_nothing(redis_url: str, flavor: str, namespace: str) -> None:
    ledger = Flavored(flavor, redis_url, namespace=namespace)
    ledger.close()
    with pytest.raises(LedgerClosed):
        _namespaces(ledger)
    ledger.dispose()
