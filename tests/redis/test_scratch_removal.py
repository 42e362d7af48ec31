"""Redis's ``remove_scratch`` hook: ``SCAN MATCH`` + ``UNLINK`` of a check's genesis and
record keys (every master of a Cluster); every other key stays."""

from __future__ import annotations

import redis

from ledger_redis.commands import scratch_namespace
from tests.scratch_removal import exercise, fill, inside, new_prefix, refuses, remove


def _left(url: str, prefix: str, cluster: bool) -> list[bytes]:
    """Every key anywhere that names a namespace under ``prefix`` (none may stay)."""
    if cluster:
        client: redis.RedisCluster = redis.RedisCluster.from_url(url.replace("+cluster", ""))
        keys = list(client.scan_iter(match=b"*", count=1000, target_nodes=client.PRIMARIES))
        client.close()
    else:
        with redis.Redis.from_url(url) as plain:
            keys = list(plain.scan_iter(match=b"*", count=1000))
    return [key for key in keys if scratch_namespace(key, prefix, cluster) is not None]


def test_removes_exactly_the_scratch_namespaces(redis_url: str) -> None:
    exercise(redis_url)


def test_removes_every_key_of_them(redis_url: str) -> None:
    prefix = new_prefix()
    for name in inside(prefix):
        fill(redis_url, name, prefix)
    assert _left(redis_url, prefix, cluster=False)
    assert remove(redis_url, prefix) == len(inside(prefix))
    assert _left(redis_url, prefix, cluster=False) == []


def test_cluster_removes_on_every_master(cluster_url: str) -> None:
    exercise(cluster_url)


def test_cluster_removes_every_key_of_them(cluster_url: str) -> None:
    prefix = new_prefix()
    for name in inside(prefix):
        fill(cluster_url, name, prefix)
    assert len(_left(cluster_url, prefix, cluster=True)) >= 3 * len(inside(prefix))
    assert remove(cluster_url, prefix) == len(inside(prefix))
    assert _left(cluster_url, prefix, cluster=True) == []


def test_refuses_any_other_prefix(redis_url: str, cluster_url: str) -> None:
    refuses(redis_url)
    refuses(cluster_url)
