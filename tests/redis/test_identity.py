"""Durability and identity (issue 8, items 3, 4, 9): what a store_id claims, and a store
that forgets, changes its configuration or becomes a replica after the ledger opened."""

from __future__ import annotations

import os
import random
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from ledger_core import open_ledger
from ledger_core.errors import LedgerError, LedgerUnavailable, UnsafeStoreConfig
from ledger_core.ids import MAX_MARKER_BYTES
from ledger_core.protocol import Durability
from ledger_redis import RedisLedger, commands
from tests.flavors import Flavored
from tests.servers import redis as servers

from .test_conformance_redis import forget_cluster, forget_standalone

FLAVORS = ["sync", "async"]


# ---------------------------------------------------------------- item 3: durability


def test_snapshot_only_never_proves_and_forgets_on_kill_9(namespace: str) -> None:
    """The Redis default (snapshots only): kill -9 loses the spend, so no store_id."""
    with servers.local_redis(servers.SNAPSHOT_ONLY) as server:
        with Flavored("sync", server.url, namespace=namespace) as ledger:
            info = ledger.describe()
            assert info.store_id is None
            assert "snapshot" in (info.reason or "")
            assert info.durability == Durability.NONE
            assert ledger.spend("req-42") is True
        server.kill9()
        server.start()
        with Flavored("sync", server.url, namespace=namespace) as again:
            assert again.store_id is None  # the second True below is under no store_id
            assert again.spend("req-42") is True  # the crash forgot it: why it never proves


@pytest.mark.parametrize("flavor", FLAVORS)
def test_everysec_never_proves(
    flavor: str, everysec_server: servers.RedisServer, namespace: str
) -> None:
    """everysec may postpone the AOF write and reply anyway: a spend acknowledged then
    was lost in a kill -9 under load (True twice), so not even durability=process proves."""
    for options in ({}, {"durability": "process"}):
        with Flavored(flavor, everysec_server.url, namespace=namespace, **options) as ledger:
            info = ledger.describe()
            assert info.store_id is None
            assert "appendfsync everysec" in (info.reason or "")
            assert info.durability == Durability.NONE


@pytest.mark.parametrize("flavor", FLAVORS)
def test_page_cache_proves_only_with_durability_process(
    flavor: str, page_cache_server: servers.RedisServer, namespace: str
) -> None:
    url = page_cache_server.url
    with Flavored(flavor, url, namespace=namespace) as default:
        info = default.describe()
        assert info.store_id is None
        assert "appendfsync no" in (info.reason or "")
        assert "durability=process" in (info.reason or "")
        assert info.durability == Durability.PROCESS  # what the server offers
    with Flavored(flavor, url, namespace=namespace, durability="process") as accepted:
        info = accepted.describe()
        assert info.store_id is not None
        assert info.durability == Durability.PROCESS
        assert "durability=process" in (info.reason or "")
        assert accepted.spend("page-cache-1") is True
    page_cache_server.kill9()  # a server-process crash: the page cache keeps the write
    page_cache_server.start()
    with Flavored(flavor, url, namespace=namespace, durability="process") as again:
        assert again.store_id == info.store_id
        assert again.spend("page-cache-1") is False


def test_always_is_machine_durability(durable_server: servers.RedisServer, namespace: str) -> None:
    with Flavored("sync", durable_server.url, namespace=namespace) as ledger:
        info = ledger.describe()
        assert info.store_id is not None
        assert info.durability == Durability.MACHINE
        assert info.reason is None


def test_unknown_durability_option_is_refused(redis_url: str) -> None:
    with pytest.raises(LedgerError, match="durability"):
        open_ledger(redis_url, durability="disk")


# ---------------------------------------------------------------- item 4: forgetting


@pytest.mark.parametrize("flavor", FLAVORS)
def test_flushall_fails_the_old_instance_closed(flavor: str, namespace: str) -> None:
    with servers.local_redis(servers.PLAIN) as server:
        old = Flavored(flavor, server.url, namespace=namespace)
        before = old.store_id
        assert before is not None
        assert old.spend("a") is True
        forget_standalone(server.url)()
        with pytest.raises(UnsafeStoreConfig, match="forgot"):
            old.spend("a")
        with pytest.raises(UnsafeStoreConfig, match="forgot"):
            old.is_spent("a")
        with Flavored(flavor, server.url, namespace=namespace) as new:
            assert new.store_id is not None
            assert new.store_id != before  # a new genesis: a new store
            assert new.spend("a") is True
        # The old instance never adopts the new identity.
        with pytest.raises(UnsafeStoreConfig):
            old.spend("a")
        with pytest.raises(UnsafeStoreConfig):
            old.is_spent("b")
        old.dispose()


@pytest.fixture(scope="module")
def private_cluster_url() -> Iterator[str]:
    """A Cluster of this module's own: FLUSHALL must not touch the session's Cluster,
    whose conformance ids are checked again at the end of the session (C2)."""
    try:
        with servers.local_cluster() as nodes:
            yield f"redis+cluster://127.0.0.1:{nodes[0].port}"
    except servers.ServerUnavailable as exc:
        pytest.skip(str(exc))


@pytest.mark.parametrize("flavor", FLAVORS)
def test_flushall_on_the_cluster(flavor: str, private_cluster_url: str, namespace: str) -> None:
    cluster_url = private_cluster_url
    old = Flavored(flavor, cluster_url, namespace=namespace)
    before = old.store_id
    assert old.spend("a") is True
    forget_cluster(cluster_url)()
    with pytest.raises(UnsafeStoreConfig, match="forgot"):
        old.spend("a")
    with pytest.raises(UnsafeStoreConfig, match="forgot"):
        old.is_spent("a")
    with Flavored(flavor, cluster_url, namespace=namespace) as new:
        assert new.store_id is not None
        assert new.store_id != before
        assert new.spend("a") is True
    with pytest.raises(UnsafeStoreConfig):
        old.spend("a")
    old.dispose()


@pytest.mark.parametrize("flavor", FLAVORS)
def test_eviction_policy_changed_after_open_fails_closed(flavor: str, namespace: str) -> None:
    with servers.local_redis(servers.PLAIN) as server:
        admin = redis.Redis(port=server.port)
        ledger = Flavored(flavor, server.url, namespace=namespace, recheck_interval="0")
        assert ledger.store_id is not None
        assert ledger.spend("before") is True
        admin.config_set("maxmemory-policy", "allkeys-lru")
        with pytest.raises(UnsafeStoreConfig, match="allkeys-lru"):
            ledger.spend("after")
        with pytest.raises(UnsafeStoreConfig, match="allkeys-lru"):
            ledger.is_spent("before")
        with Flavored(flavor, server.url, namespace=namespace) as new:
            assert new.store_id is None  # a new instance sees the policy at open
        admin.config_set("maxmemory-policy", "noeviction")
        with pytest.raises(UnsafeStoreConfig):  # stays failed: reopen to prove again
            ledger.spend("after")
        admin.close()
        ledger.dispose()


@pytest.mark.parametrize("flavor", FLAVORS)
def test_a_recheck_that_cannot_read_is_no_verdict(flavor: str, namespace: str) -> None:
    """A server that is briefly gone makes the operation raise LedgerUnavailable; the
    ledger is not failed for good (only a configuration the server shows does that)."""
    with servers.local_redis(servers.PLAIN) as server:
        ledger = Flavored(
            flavor, server.url, namespace=namespace, recheck_interval="0", connect_timeout="1"
        )
        assert ledger.spend("kept") is True
        server.stop()
        with pytest.raises(LedgerUnavailable) as caught:
            ledger.spend("during")
        assert not isinstance(caught.value, UnsafeStoreConfig)
        server.start()
        assert ledger.spend("kept") is False
        assert ledger.spend("after") is True
        ledger.dispose()


def test_cluster_recheck_during_a_burst(private_cluster_url: str, namespace: str) -> None:
    """The re-check's INFO/CONFIG take connections too: under a burst as wide as the
    client's pool they wait their turn instead of failing the ledger. The client's
    socket timeout (the budget of one operation) is long: 1,024 spends, each with its
    re-check on every primary, took over the 5 s default on two loaded cores, which
    tested the machine's speed; a call that fails at once for want of a connection
    still fails here."""
    import asyncio

    import redis.asyncio.cluster

    from ledger_redis import AsyncRedisLedger

    port = int(private_cluster_url.rsplit(":", 1)[1])

    async def main() -> list[object]:
        client = redis.asyncio.cluster.RedisCluster(host="127.0.0.1", port=port, socket_timeout=60)
        ledger = await AsyncRedisLedger.from_client(client, namespace=namespace, recheck_interval=0)
        gate = asyncio.Event()

        async def one(request_id: str) -> object:
            await gate.wait()
            try:
                return await ledger.spend(request_id)
            except LedgerError as exc:
                return exc

        tasks = [asyncio.ensure_future(one(f"b-{i}")) for i in range(4) for _ in range(256)]
        await asyncio.sleep(0)
        gate.set()
        answers = list(await asyncio.gather(*tasks))
        await ledger.aclose()
        await client.aclose()
        return answers

    answers = asyncio.run(main())
    assert [a for a in answers if not isinstance(a, bool)] == []
    assert sum(1 for a in answers if a is True) == 4


# ---------------------------------------------------------------- item 9: replicas


@pytest.fixture
def promoted_pair() -> Iterator[tuple[servers.RedisServer, servers.RedisServer]]:
    """Two servers holding the same data set; ``a`` is the primary."""
    with servers.local_redis(servers.PLAIN) as a, servers.local_redis(servers.PLAIN) as b:
        yield a, b


def _wait_synced(replica: redis.Redis) -> None:
    deadline = time.monotonic() + 20
    while replica.info("replication").get("master_link_status") != "up":
        assert time.monotonic() < deadline, "the replica never synced"
        time.sleep(0.05)


@pytest.mark.parametrize("flavor", FLAVORS)
def test_reads_refused_after_replicaof_at_runtime(
    flavor: str,
    promoted_pair: tuple[servers.RedisServer, servers.RedisServer],
    namespace: str,
) -> None:
    a, b = promoted_pair
    ledger = Flavored(flavor, a.url, namespace=namespace)
    assert ledger.spend("x") is True
    client_a, client_b = redis.Redis(port=a.port), redis.Redis(port=b.port)
    client_b.replicaof("127.0.0.1", a.port)  # b copies a (genesis included)
    _wait_synced(client_b)
    client_b.replicaof("NO", "ONE")
    client_a.replicaof("127.0.0.1", b.port)  # now a is a replica of the same data
    _wait_synced(client_a)
    with pytest.raises(UnsafeStoreConfig, match="replica"):
        ledger.spend("y")
    with pytest.raises(UnsafeStoreConfig, match="replica"):
        ledger.is_spent("x")  # reads follow the spends' rule, in the same round trip
    client_a.close()
    client_b.close()
    ledger.dispose()


# ---------------------------------------------------------------- create, markers, fork


@pytest.mark.parametrize("flavor", FLAVORS)
def test_create_false_never_creates(flavor: str, redis_url: str, namespace: str) -> None:
    with pytest.raises(LedgerUnavailable, match="create"):
        Flavored(flavor, redis_url, namespace=namespace, create="false")
    client = redis.Redis.from_url(redis_url)
    assert client.exists(commands.genesis_key(namespace)) == 0  # nothing was written
    client.close()
    with Flavored(flavor, redis_url, namespace=namespace) as created:
        sid = created.store_id
    with Flavored(flavor, redis_url, namespace=namespace, create="false") as opened:
        assert opened.store_id == sid


@pytest.mark.parametrize("flavor", FLAVORS)
def test_longest_marker_spends(flavor: str, redis_url: str, namespace: str) -> None:
    marker = b"\xff" + b"m" * (MAX_MARKER_BYTES - 1)
    with Flavored(flavor, redis_url, namespace=namespace) as ledger:
        assert ledger.run(ledger.ledger.spend_marker(marker)) is True
        assert ledger.run(ledger.ledger.spend_marker(marker)) is False
        assert ledger.run(ledger.ledger.is_marker_spent(marker)) is True


def test_noscript_falls_back_to_eval(redis_url: str, namespace: str) -> None:
    with Flavored("sync", redis_url, namespace=namespace) as ledger:
        assert ledger.spend("s1") is True
        redis.Redis.from_url(redis_url).script_flush()
        assert ledger.spend("s2") is True
        redis.Redis.from_url(redis_url).script_flush()
        assert ledger.is_spent("s1") is True


def test_fork_children_spend_through_the_parents_ledger(redis_url: str, namespace: str) -> None:
    """Opened and used in the parent; 6 forked children spend the same 100 ids in
    shuffled order, released at once: exactly one True per id."""
    ledger = open_ledger(redis_url, namespace=namespace, timeout="5")
    assert isinstance(ledger, RedisLedger)
    assert ledger.spend("parent") is True
    ids = [f"fork-{i}" for i in range(100)]
    go_read, go_write = os.pipe()
    children = []
    for child in range(6):
        out_read, out_write = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - runs in the child
            code = 1
            try:
                os.close(go_write)
                os.read(go_read, 1)  # the barrier: the parent closes go_write
                order = ids[:]
                random.Random(child).shuffle(order)
                won = [rid for rid in order if ledger.spend(rid) is True]
                os.write(out_write, "\n".join(won).encode() + b"\n.")
                code = 0
            finally:
                os._exit(code)
        os.close(out_write)
        children.append((pid, out_read))
    os.close(go_read)
    os.close(go_write)  # release every child at once
    wins: list[str] = []
    for pid, out_read in children:
        data = b""
        while chunk := os.read(out_read, 65536):
            data += chunk
        os.close(out_read)
        _, status = os.waitpid(pid, 0)
        assert os.WEXITSTATUS(status) == 0
        assert data.endswith(b".")
        wins.extend(line for line in data[:-1].decode().splitlines() if line)
    assert sorted(wins) == sorted(ids)  # each id won exactly once
    assert ledger.spend("parent") is False  # the parent's ledger still works
    assert ledger.is_spent("fork-7") is True
    ledger.close()


# ---------------------------------------------------------------- one namespace forgets


def _forget_namespace(url: str, namespace: str, ids: list[str], *, cluster: bool) -> None:
    """DEL one namespace's genesis and records, nothing else (the store forgets it)."""
    keys = commands.Keys(namespace, cluster)
    doomed = [keys.genesis, *(keys.record(i.encode()) for i in ids)]
    if cluster:
        client: Any = redis.cluster.RedisCluster.from_url("redis://" + url.split("://", 1)[1])
    else:
        client = redis.Redis.from_url(url)
    try:
        assert client.delete(*doomed) == len(doomed)
    finally:
        client.close()


@pytest.mark.parametrize("flavor", FLAVORS)
def test_one_namespace_forgotten_fails_its_instances_closed(
    flavor: str, redis_url: str, namespace: str
) -> None:
    gone = Flavored(flavor, redis_url, namespace=namespace + "-gone")
    kept = Flavored(flavor, redis_url, namespace=namespace + "-kept")
    try:
        assert gone.spend("a") is True
        assert kept.spend("a") is True
        _forget_namespace(redis_url, namespace + "-gone", ["a"], cluster=False)
        with pytest.raises(UnsafeStoreConfig, match="forgot"):
            gone.is_spent("a")  # immediately: the read proves the genesis itself
        with pytest.raises(UnsafeStoreConfig):
            gone.spend("a")
        assert kept.is_spent("a") is True  # another namespace is another store
        assert kept.spend("a") is False
    finally:
        gone.dispose()
        kept.dispose()


@pytest.mark.parametrize("flavor", FLAVORS)
def test_a_listing_page_proves_the_identity_after_its_scan(
    flavor: str, private_cluster_url: str, namespace: str
) -> None:
    """The namespace forgets between a page's identity proof and its SCAN (on a Cluster
    they are two commands): proved before, the empty page read as the end of the ids."""
    ledger = Flavored(flavor, private_cluster_url, namespace=namespace)
    try:
        ids = [f"listed-{i}" for i in range(20)]
        assert all(ledger.spend(i) for i in ids)
        link = ledger.ledger._link
        inner = link.execute

        def forgets(command: Any) -> None:
            if command[0] == "SCAN":
                _forget_namespace(private_cluster_url, namespace, ids, cluster=True)

        def execute(command: Any, deadline: Any, **options: Any) -> Any:
            forgets(command)
            return inner(command, deadline, **options)

        async def aexecute(command: Any, deadline: Any, **options: Any) -> Any:
            forgets(command)
            return await inner(command, deadline, **options)

        link.execute = execute if ledger.loop is None else aexecute
        with pytest.raises(UnsafeStoreConfig, match="forgot"):
            ledger.spent_ids()
    finally:
        ledger.dispose()
