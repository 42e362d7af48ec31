"""Failures and configurations: lost replies (C5), outages (C4), safety checks (C2, C6)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
import redis

from ledger_conformance.faults import FaultProxy, Toxic
from ledger_core import open_ledger
from ledger_core.errors import (
    AmbiguousSpend,
    LedgerError,
    LedgerUnavailable,
    MissingDriver,
    UnsafeStoreConfig,
)
from ledger_redis import AsyncRedisLedger, RedisLedger
from ledger_redis.errors import ReplyLost
from tests.flavors import Flavored
from tests.servers import redis as servers

from .held import Held

FLAVORS = ["sync", "async"]


@pytest.fixture
def proxy(local_plain: servers.RedisServer) -> Iterator[FaultProxy]:
    with FaultProxy("127.0.0.1", local_plain.port) as fault:
        yield fault


def _through(proxy: FaultProxy, **query: str) -> str:
    options = "&".join(f"{k}={v}" for k, v in query.items())
    host, port = proxy.address
    return f"redis://{host}:{port}/0" + (f"?{options}" if options else "")


@pytest.mark.parametrize("flavor", FLAVORS)
def test_lost_reply_of_our_own_write_is_resolved_true(
    flavor: str, proxy: FaultProxy, namespace: str
) -> None:
    with Held(flavor, proxy, namespace) as ledger:
        # The script lands; its reply is lost with the connection; the retry inside
        # the same call finds our own token.
        assert ledger.lose_one_reply(lambda: ledger.spend("lost-ours")) is True
        assert ledger.spend("lost-ours") is False
        assert ledger.is_spent("lost-ours") is True


@pytest.mark.parametrize("flavor", FLAVORS)
def test_lost_reply_of_a_losing_write_is_resolved_false(
    flavor: str, proxy: FaultProxy, local_plain: servers.RedisServer, namespace: str
) -> None:
    with (
        Flavored(flavor, local_plain.url, namespace=namespace) as direct,
        Held(flavor, proxy, namespace) as lossy,
    ):
        assert direct.spend("lost-theirs") is True
        assert lossy.lose_one_reply(lambda: lossy.spend("lost-theirs")) is False  # foreign token


@pytest.mark.parametrize("flavor", FLAVORS)
def test_unresolvable_loss_is_ambiguous_and_landed(
    flavor: str, proxy: FaultProxy, namespace: str
) -> None:
    with Flavored(flavor, _through(proxy), namespace=namespace) as ledger:
        proxy.set(Toxic.RESET_AFTER_REQUEST)  # the spend's reply and the resolving retry's
        with pytest.raises(AmbiguousSpend) as caught:
            ledger.spend("lost-twice")
        assert caught.value.__cause__ is not None
        assert proxy.stats.replies_dropped >= 2
        proxy.heal()
        assert ledger.is_spent("lost-twice") is True  # H2 will count it as spent
        assert ledger.spend("lost-twice") is False


@pytest.mark.parametrize("flavor", FLAVORS)
def test_silent_network_raises_within_the_timeout(
    flavor: str, proxy: FaultProxy, namespace: str
) -> None:
    with Flavored(flavor, _through(proxy, timeout="0.3"), namespace=namespace) as ledger:
        proxy.set(Toxic.BLACKHOLE)
        started = time.monotonic()
        with pytest.raises(AmbiguousSpend):
            ledger.spend("black-holed")
        with pytest.raises(LedgerUnavailable):
            ledger.is_spent("black-holed")
        assert time.monotonic() - started < 5
        proxy.heal()
        # Nothing reached the server while the network was silent.
        assert ledger.is_spent("black-holed") is False


@pytest.mark.parametrize("flavor", FLAVORS)
def test_timeout_bounds_the_whole_call(flavor: str, proxy: FaultProxy, namespace: str) -> None:
    """A spend whose reply never comes resolves within the same budget: the lost
    trip and the resolving retry together take about ``timeout``, not twice it."""
    url = _through(proxy, timeout="1", connect_timeout="1")
    with Flavored(flavor, url, namespace=namespace) as ledger:
        assert ledger.spend("warm") is True  # a pooled connection exists
        proxy.set(Toxic.BLACKHOLE)
        started = time.monotonic()
        with pytest.raises(AmbiguousSpend) as lost:
            ledger.spend("black-holed-budget")
        spent_time = time.monotonic() - started
        # the deadline cut a read: a lost reply the spend tried to resolve, not a driver
        # bug (the async pool's connection was once released twice: a KeyError)
        assert isinstance(lost.value.__cause__, ReplyLost), repr(lost.value.__cause__)
        started = time.monotonic()
        with pytest.raises(LedgerUnavailable):
            ledger.is_spent("black-holed-budget")
        read_time = time.monotonic() - started
        proxy.heal()
    assert spent_time < 1.6, spent_time
    assert read_time < 1.6, read_time


@pytest.mark.parametrize("flavor", FLAVORS)
def test_trickled_reply_cannot_outlast_the_timeout(
    flavor: str, proxy: FaultProxy, namespace: str
) -> None:
    """A reply sent a byte every 0.5 s restarts a per-read socket timeout with every
    byte: the deadline must cut the reads themselves, on a pooled connection (the spend)
    and on a new one, whose handshake trickles too (the read after the spend dropped it)."""
    with Flavored(flavor, _through(proxy, timeout="1"), namespace=namespace) as ledger:
        assert ledger.spend("warm") is True
        proxy.set(Toxic.TRICKLE, latency=0.5)
        timings = []
        for call, error in ((ledger.spend, AmbiguousSpend), (ledger.is_spent, LedgerUnavailable)):
            started = time.monotonic()
            with pytest.raises(error) as caught:
                call("trickled")
            timings.append(time.monotonic() - started)
            # The deadline's cut is a lost reply like any other (a cancelled read once
            # released its connection twice: "unexpected KeyError").
            assert "unexpected" not in str(caught.value), caught.value
        proxy.heal()
    assert max(timings) < 2.0, timings


@pytest.mark.parametrize("flavor", FLAVORS)
def test_server_gone_is_unavailable_not_false(flavor: str, namespace: str) -> None:
    with servers.local_redis(servers.PLAIN) as server:
        ledger = Flavored(flavor, server.url + "?connect_timeout=1", namespace=namespace)
        assert ledger.spend("before") is True
        server.stop()
        # A pooled connection may already carry the spend when the loss is noticed
        # (asyncio sees the server's FIN only after sending): then it is ambiguous.
        with pytest.raises(LedgerUnavailable):
            ledger.spend("during")
        with pytest.raises(LedgerUnavailable) as caught:
            ledger.spend("during")
        assert not isinstance(caught.value, AmbiguousSpend)  # refused before sending
        with pytest.raises(LedgerUnavailable):
            ledger.is_spent("before")
        ledger.dispose()


def test_durable_server_keeps_every_spend_across_kill_9(
    durable_server: servers.RedisServer, namespace: str
) -> None:
    ids = [f"durable-{i}" for i in range(50)]
    with (
        Flavored("sync", durable_server.url, namespace=namespace) as sync_ledger,
        Flavored("async", durable_server.url, namespace=namespace) as async_ledger,
    ):
        before = sync_ledger.store_id
        assert before is not None
        assert "RDB" not in sync_ledger.describe().identity
        for i, request_id in enumerate(ids):
            ledger = sync_ledger if i % 2 else async_ledger
            assert ledger.spend(request_id) is True
    durable_server.kill9()
    durable_server.start()
    for flavor in FLAVORS:
        with Flavored(flavor, durable_server.url, namespace=namespace, require_aof="true") as again:
            assert again.store_id == before
            assert all(again.is_spent(request_id) for request_id in ids)
            assert not any(again.spend(request_id) for request_id in ids)


@pytest.mark.parametrize("flavor", FLAVORS)
def test_allkeys_lru_never_proves(flavor: str, lru_url: str, namespace: str) -> None:
    with Flavored(flavor, lru_url, namespace=namespace) as ledger:
        info = ledger.describe()
        assert ledger.store_id is None
        assert info.store_id is None
        assert info.reason is not None
        assert "allkeys-lru" in info.reason
        assert ledger.spend("still-once") is True  # it still spends, it only never proves
        assert ledger.spend("still-once") is False


def test_no_persistence_never_proves() -> None:
    with servers.local_redis(("--save", "", "--appendonly", "no")) as server:
        with Flavored("sync", server.url) as ledger:
            assert ledger.store_id is None
            assert "no persistence" in (ledger.describe().reason or "")
        with Flavored("sync", server.url, require_aof="true") as strict:
            assert strict.store_id is None


@pytest.mark.parametrize("flavor", FLAVORS)
def test_replica_never_proves_and_refuses_spends(
    flavor: str, primary_and_replica: tuple[servers.RedisServer, servers.RedisServer]
) -> None:
    _, replica = primary_and_replica
    with Flavored(flavor, replica.url) as ledger:
        assert ledger.store_id is None
        assert "replica" in (ledger.describe().reason or "")
        with pytest.raises(UnsafeStoreConfig):
            ledger.spend("on-replica")


@pytest.mark.parametrize("flavor", FLAVORS)
def test_wait_for_a_replica(
    flavor: str,
    primary_and_replica: tuple[servers.RedisServer, servers.RedisServer],
    namespace: str,
) -> None:
    primary, replica = primary_and_replica
    with Flavored(flavor, primary.url, namespace=namespace, wait_replicas="1") as ledger:
        assert ledger.spend("replicated") is True
        assert ledger.spend("replicated") is False
    assert redis.Redis(port=replica.port).exists(
        b"{}dl:" + str(len(namespace)).encode() + b":" + namespace.encode() + b":replicated"
    )


@pytest.mark.parametrize("flavor", FLAVORS)
def test_missing_replication_ack_is_ambiguous(flavor: str, redis_url: str, namespace: str) -> None:
    url = redis_url + "?wait_replicas=1&wait_timeout=0.1"
    with Flavored(flavor, url, namespace=namespace) as ledger:
        with pytest.raises(AmbiguousSpend, match="0 of 1 replicas"):
            ledger.spend("unreplicated")
        assert ledger.is_spent("unreplicated") is True  # landed on the primary only
        assert ledger.spend("unreplicated") is False  # a loser waits for nothing


def test_waitaof_on_an_old_server_is_refused(redis_url: str) -> None:
    version = redis.Redis.from_url(redis_url).info("server")["redis_version"]
    if tuple(int(x) for x in version.split(".")[:2]) >= (7, 2):
        with pytest.raises(UnsafeStoreConfig, match="appendonly"):
            open_ledger(redis_url, wait_aof="true")  # the plain server has no AOF
        return
    with pytest.raises(UnsafeStoreConfig, match="WAITAOF"):
        open_ledger(redis_url, wait_aof="true")


PASSWORD = "s3cr3t-Pa55word"


@pytest.fixture(scope="module")
def acl_users(local_plain: servers.RedisServer) -> servers.RedisServer:
    admin = redis.Redis(port=local_plain.port)
    admin.acl_setuser(
        "ledger", enabled=True, passwords=[f"+{PASSWORD}"], keys=["*"], commands=["+@all"]
    )
    admin.acl_setuser(
        "managed",
        enabled=True,
        passwords=[f"+{PASSWORD}"],
        keys=["*"],
        commands=["+@all", "-config"],
    )
    admin.close()
    return local_plain


@pytest.mark.parametrize("flavor", FLAVORS)
def test_password_never_shows(flavor: str, acl_users: servers.RedisServer) -> None:
    url = f"redis://ledger:{PASSWORD}@127.0.0.1:{acl_users.port}/0"
    with Flavored(flavor, url) as ledger:
        assert ledger.spend("with-password") in (True, False)
        shown = f"{ledger.ledger!r} {ledger.describe()!r}"
        assert PASSWORD not in shown
        assert "***" in shown
    wrong = f"redis://ledger:wrong-{PASSWORD}@127.0.0.1:{acl_users.port}/0"
    with pytest.raises(LedgerError) as caught:
        Flavored(flavor, wrong)
    assert PASSWORD not in str(caught.value)
    assert PASSWORD not in repr(caught.value)


@pytest.mark.parametrize("flavor", FLAVORS)
def test_blocked_config_is_said_and_can_be_asserted(
    flavor: str, acl_users: servers.RedisServer, namespace: str
) -> None:
    base = f"127.0.0.1:{acl_users.port}/0"
    with Flavored(flavor, f"redis://managed:{PASSWORD}@{base}", namespace=namespace) as managed:
        assert managed.store_id is None
        reason = managed.describe().reason or ""
        assert ("trust_config" in reason and "NOPERM" in reason) or "permission" in reason
    with (
        Flavored(
            flavor, f"redis://managed:{PASSWORD}@{base}", namespace=namespace, trust_config="true"
        ) as trusted,
        Flavored(flavor, f"redis://{base}", namespace=namespace) as admin,
    ):
        assert trusted.store_id is not None
        assert trusted.store_id == admin.store_id  # the same store, however it was checked
        assert "trust_config" in trusted.describe().identity


def test_host_clients_are_used_and_never_closed(redis_url: str, namespace: str) -> None:
    client = redis.Redis.from_url(redis_url)  # redis-py's default retries stay the host's
    ledger = RedisLedger.from_client(client, namespace=namespace)
    assert ledger.spend("hosted") is True
    assert ledger.spend("hosted") is False
    ledger.close()
    assert client.ping() is True
    pool_ledger = RedisLedger.from_client(client.connection_pool, namespace=namespace)
    assert pool_ledger.store_id == ledger.store_id
    assert pool_ledger.is_spent("hosted") is True
    with pytest.raises(LedgerError, match="timeout"):
        RedisLedger.from_client(client, timeout=1)
    client.close()

    async def main() -> None:
        aclient = redis.asyncio.Redis.from_url(redis_url)
        aledger = await AsyncRedisLedger.from_client(aclient, namespace=namespace)
        assert aledger.store_id == ledger.store_id
        assert await aledger.spend("hosted") is False
        await aledger.aclose()
        assert await aclient.ping() is True
        await aclient.aclose()

    import asyncio

    asyncio.run(main())


def test_host_cluster_client(cluster_url: str, namespace: str) -> None:
    cluster = redis.cluster.RedisCluster.from_url("redis://" + cluster_url.split("://", 1)[1])
    ledger = RedisLedger.from_client(cluster, namespace=namespace)
    assert ledger.describe().backend == "redis-cluster"
    assert ledger.spend("hosted-cluster") is True
    assert ledger.spend("hosted-cluster") is False
    ledger.close()
    assert cluster.ping() is True
    cluster.close()
    with pytest.raises(LedgerError, match="Cluster"):
        open_ledger(cluster_url, wait_replicas="1")


def test_imports_without_the_driver() -> None:
    code = (
        "import sys; sys.modules['redis'] = None\n"
        "import ledger_redis\n"
        "from ledger_core import open_ledger\n"
        "from ledger_core.errors import MissingDriver\n"
        "try:\n    open_ledger('redis://127.0.0.1:1/0')\n"
        "except MissingDriver as exc:\n    print('MISSING', exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "MISSING" in done.stdout
    assert "decision-ledger[redis]" in done.stdout
    assert MissingDriver.__name__ == "MissingDriver"
