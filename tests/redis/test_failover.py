"""A failover never turns a spent id back into an unspent one under the same store_id.

The replica's replication link runs through a relay that stops forwarding (the primary
still counts a connected replica), 300 ids are spent, the primary is killed (-9) and the
replica promoted (``REPLICAOF NO ONE``, a Sentinel failover, a Cluster takeover). Then,
wherever the store answers with the store_id the spends were proven under, every one of
them is still spent, and an instance opened before fails closed. Only
``failover_may_lose_spends=accept`` keeps the store_id across, and loses them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis

from ledger_core import open_ledger
from ledger_core.errors import LedgerError
from ledger_core.registry import available_schemes, register_backend
from ledger_redis import SENTINEL_BACKEND
from tests.flavors import Flavored
from tests.servers import redis as servers
from tests.servers.common import serve_or_skip

IDS = [f"spent-{i}" for i in range(300)]
ACCEPT = {"failover_may_lose_spends": "accept"}

if "redis+sentinel" not in available_schemes():  # an install older than this checkout
    register_backend("redis+sentinel", SENTINEL_BACKEND)


def ledger_at(url: str, **options: str) -> Any:
    """A ledger (its context manager) from ``url``."""
    return open_ledger(url, **options)


def lost_under(ledger: Any, store_id: str | None) -> list[str]:
    """The ids of ``IDS`` that read unspent (or spend True again) under ``store_id``:
    none may, wherever the store answers with it."""
    assert store_id is not None
    if ledger.store_id != store_id:
        return []  # another store: hosts ask again (H5)
    return [i for i in IDS if not ledger.is_spent(i) or ledger.spend(i)]


def assert_failed_closed(ledger: Any) -> None:
    """An instance opened before the failover never answers for the lost ids."""
    for request_id in IDS[:3]:
        with pytest.raises(LedgerError):
            ledger.is_spent(request_id)
        with pytest.raises(LedgerError):
            ledger.spend(request_id)


@pytest.fixture
def pair() -> Iterator[servers.Replicated]:
    yield from serve_or_skip(servers.local_replicated)


@pytest.fixture
def watched() -> Iterator[servers.Replicated]:
    yield from serve_or_skip(lambda: servers.local_replicated(sentinels=3))


def test_partition_then_promote_the_replica(pair: servers.Replicated) -> None:
    with ledger_at(pair.primary.url, namespace="failover") as first:
        proven = first.store_id
        assert proven is not None
        assert "." in proven
        lines = [c.detail for c in first.doctor_checks() if c.name == "replication"]
        assert any("bound to master_replid" in line for line in lines), lines
        with ledger_at(pair.primary.url, namespace="failover", **ACCEPT) as risky:
            assert "failover_may_lose_spends=accept" in (risky.describe().reason or "")
            pair.partition()
            assert all(first.spend(i) for i in IDS)
            accepted = risky.store_id
    pair.promote()
    with ledger_at(pair.replica.url, namespace="failover") as after:
        assert after.store_id is not None
        assert after.store_id != proven
        assert not lost_under(after, proven)
        assert after.spend("fresh") is True  # the new store proves
    with ledger_at(pair.replica.url, namespace="failover", **ACCEPT) as risky_after:
        assert risky_after.store_id == accepted  # what the option's name warns of:
        assert len(lost_under(risky_after, accepted)) == len(IDS)


def test_sentinel_failover_follows_and_fails_closed(watched: servers.Replicated) -> None:
    url = watched.sentinel_url
    early = Flavored("async", url, namespace="failover", timeout="2")
    with ledger_at(url, namespace="failover", timeout="2") as first:
        proven = first.store_id
        assert proven is not None
        assert "." in proven
        assert first.describe().location.startswith("redis+sentinel://")
        watched.partition()
        assert all(first.spend(i) for i in IDS)
        assert early.store_id == proven
        assert early.spend(IDS[0]) is False
        watched.promote()
        assert_failed_closed(first)  # it followed the Sentinels to the new master
        assert_failed_closed(early)
        early.dispose()
    with ledger_at(url, namespace="failover", timeout="2") as after:
        assert after.describe().location == first.describe().location
        assert after.store_id is not None
        assert after.store_id != proven
        assert not lost_under(after, proven)
        assert after.spend("fresh") is True
    with Flavored("async", url, namespace="failover", timeout="2") as late:
        assert late.store_id == after.store_id
        assert late.spend("fresh") is False


@pytest.fixture(scope="module")
def cluster() -> Iterator[list[servers.RedisServer]]:
    yield from serve_or_skip(lambda: servers.local_cluster(3, replicas=1))


def _slot_master_and_replica(
    nodes: list[servers.RedisServer], namespace: str
) -> tuple[servers.RedisServer, servers.RedisServer]:
    from ledger_redis.commands import Keys

    client = redis.cluster.RedisCluster(host="127.0.0.1", port=nodes[0].port)
    try:
        slot = client.keyslot(Keys(namespace, cluster=True).genesis)  # type: ignore[no-untyped-call]
        owner = client.nodes_manager.get_node_from_slot(slot)
        master = next(n for n in nodes if n.port == owner.port)
        replica = next(
            n
            for n in nodes
            if n.port != master.port
            and servers._info(n.port).get("master_port") == str(master.port)
        )
    finally:
        client.close()
    return master, replica


@pytest.mark.parametrize("how", ["kill -9 + TAKEOVER", "FORCE"])
def test_cluster_master_failover(cluster: list[servers.RedisServer], how: str) -> None:
    namespace = f"failover-{how.split()[0]}"
    master, replica = _slot_master_and_replica(cluster, namespace)
    url = f"redis+cluster://127.0.0.1:{replica.port}"
    with ledger_at(url, namespace=namespace, timeout="2") as first:
        proven = first.store_id
        assert proven is not None
        assert "." in proven
        # The replica loses its link and cannot re-sync (a user it cannot log in as).
        servers._command(replica.port, "CONFIG", "SET", "masteruser", "nobody")
        servers._command(replica.port, "CLIENT", "KILL", "TYPE", "master")
        assert all(first.spend(i) for i in IDS)
        if how == "FORCE":
            servers._command(replica.port, "CLUSTER", "FAILOVER", "FORCE")
        else:
            master.kill9()
            servers._command(replica.port, "CLUSTER", "FAILOVER", "TAKEOVER")
        servers._wait(lambda: servers._info(replica.port).get("role") == "master", "takeover")
        servers._command(replica.port, "CONFIG", "SET", "masteruser", "")
        if how == "FORCE":  # the old master, alive, answers until it learns it was replaced
            servers._wait(lambda: servers._info(master.port).get("role") == "slave", "demotion")
        assert_failed_closed(first)
    with ledger_at(url, namespace=namespace, timeout="2") as after:
        assert after.store_id is not None
        assert after.store_id != proven
        assert not lost_under(after, proven)
    if how != "FORCE":
        master.start()  # it rejoins as a replica of the new master
        servers._wait(lambda: servers._synced(master.port), "the old master's re-sync", 20)


def test_a_replica_attaching_after_open_fails_the_ledger_closed() -> None:
    """Opened with no replication, a ledger proves there is still none with every
    spend: a replica attaching (a new failover target) fails it closed; a new ledger
    binds its store_id to the master's replid. A restart without replicas keeps it."""
    with (
        servers.local_redis((*servers.PLAIN, *servers.NO_SYNC_DELAY)) as primary,
        ledger_at(primary.url, namespace="attach") as alone,
    ):
        proven = alone.store_id
        assert proven is not None
        assert "." not in proven  # nothing to bind to
        assert alone.spend("before") is True
        primary.graceful_restart()  # no replica: a restart is the same store
        with ledger_at(primary.url, namespace="attach") as again:
            assert again.store_id == proven
        assert alone.spend("after-restart") is True
        args = (*servers.PLAIN, "--replicaof", "127.0.0.1", str(primary.port))
        with servers.local_redis(args) as replica:
            servers._wait(lambda: servers._synced(replica.port), "the sync")
            with pytest.raises(LedgerError, match="replication changed"):
                alone.spend("with-a-replica")
            with pytest.raises(LedgerError):
                alone.is_spent("before")  # stays failed
            with ledger_at(primary.url, namespace="attach") as bound:
                assert bound.store_id is not None
                assert bound.store_id != proven
                assert bound.is_spent("before") is True
