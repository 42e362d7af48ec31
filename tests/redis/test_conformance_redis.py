"""The whole conformance suite against each Redis configuration, through the fault proxy.

* plain: ``appendonly yes`` + ``appendfsync always``, no eviction (proves at the
  machine level), restarted cleanly;
* durable: ``appendfsync no`` opened with ``durability=process`` (the AOF is written before
  each reply, so it proves at the process level, which is what it claims), with a kill -9
  restart (C2); ``appendfsync everysec`` never proves (it may postpone that write);
* allkeys-lru: may evict, so ``store_id`` is ``None`` with the reason;
* cluster: 3 masters; every node's address goes through ``ctx.route`` (redis-py's
  ``address_remap``), so the proxy sits in front of each node the client discovers.

Each class also gives the suite a forget hook (``ledger_forget``): ``FLUSHALL`` on the
server, or on every master of the Cluster.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from contextlib import (
    AbstractAsyncContextManager,
    AbstractContextManager,
    asynccontextmanager,
    contextmanager,
)
from typing import Any
from urllib.parse import urlsplit

import pytest
import redis
import redis.asyncio.cluster
import redis.cluster

from ledger_conformance import LedgerConformance, LedgerContext, create_option, offers_create
from ledger_conformance.context import identity_route
from ledger_conformance.urlmode import rewrite
from ledger_core import open_async_ledger, open_ledger
from ledger_redis import AsyncRedisLedger, RedisLedger
from ledger_redis.commands import Keys, glob_escape
from tests.restoring import AfterRestore
from tests.servers import redis as servers

RUN = os.urandom(4).hex()  # fresh namespaces each session: the servers may be shared
TIMEOUT = "2"  # seconds: black holes end quickly, and well above the suite's latency
# With no fault proxy in the path nothing needs to end quickly: a loaded two-core machine
# stalled a re-read past 2 s (3 in 10,000, after the meta-test), which is not a fault.
CALM_TIMEOUT = "10"


def namespace_of(label: str, run: str = RUN) -> str:
    return f"conf-{run}-{label}"[:256]


def standalone_factory(url: str, **options: str) -> Callable[[LedgerContext], Any]:
    """A partial of a module-level callable, this session's RUN bound in: a freshly
    spawned interpreter rebuilds it, and reaches the same namespaces (its own import
    would draw another RUN)."""
    return offers_create(functools.partial(open_standalone, url, RUN, options))


def open_standalone(url: str, run: str, options: dict[str, str], ctx: LedgerContext) -> Any:
    routed = rewrite(url, ctx)  # host:port through ctx.route; credentials kept
    opener = open_async_ledger if ctx.flavor == "async" else open_ledger
    timeout = CALM_TIMEOUT if ctx.route is identity_route else TIMEOUT
    return opener(
        routed,
        namespace=namespace_of(ctx.store, run),
        timeout=timeout,
        connect_timeout=timeout,
        **options,
        **create_option(ctx),
    )


class Forget:
    """The suite's forget hook: the store under test forgets everything (``FLUSHALL``;
    on a Cluster, on every master). Told a store label, only that namespace's keys go
    (its genesis and every record: ``DEL``)."""

    def __init__(self, url: str, *, cluster: bool = False) -> None:
        self.url = url
        self.cluster = cluster

    def client(self) -> Any:
        if self.cluster:
            return redis.cluster.RedisCluster.from_url("redis://" + self.url.split("://", 1)[1])
        return redis.Redis.from_url(self.url)

    def keys(self, client: Any, label: str) -> list[bytes]:
        """The store's keys: its namespace's genesis and every record."""
        keys = Keys(namespace_of(label), cluster=self.cluster)
        return [keys.genesis, *client.scan_iter(glob_escape(keys.record_prefix) + b"*")]

    def __call__(self, label: str | None = None) -> object:
        client = self.client()
        try:
            if label is None and self.cluster:
                return client.flushall(target_nodes=redis.cluster.RedisCluster.PRIMARIES)
            if label is None:
                return client.flushall()
            return [client.delete(key) for key in self.keys(client, label)]
        finally:
            client.close()


class Restore(Forget):
    """The suite's restore hook: the namespace's keys (genesis and records) saved with
    ``DUMP``, then put back with ``RESTORE ... REPLACE`` once what is there now is
    deleted, as a restore of the namespace from a backup (or an RDB) brings it back."""

    def __init__(self, url: str, *, cluster: bool = False) -> None:
        super().__init__(url, cluster=cluster)
        self.saved: dict[str, list[tuple[bytes, Any]]] = {}

    def __call__(self, phase: str, label: str | None = None) -> object:  # type: ignore[override]
        assert label is not None
        client = self.client()
        try:
            keys = self.keys(client, label)
            if phase == "snapshot":
                self.saved[label] = [(key, client.dump(key)) for key in keys]
                return None
            for key in keys:
                client.delete(key)
            return [client.restore(key, 0, value, replace=True) for key, value in self.saved[label]]
        finally:
            client.close()


def forget_standalone(url: str) -> Forget:
    return Forget(url)


def forget_cluster(url: str) -> Forget:
    return Forget(url, cluster=True)


def cluster_factory(url: str) -> Callable[[LedgerContext], Any]:
    """A partial of a module-level callable, like ``standalone_factory``: the spawned
    interpreter axes reach the Cluster too."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 6379
    return offers_create(functools.partial(open_cluster, host, port, RUN))


def open_cluster(host: str, port: int, run: str, ctx: LedgerContext) -> Any:
    """Every node the client discovers is reached through ``ctx.route``; ``create`` is
    passed on when the suite asks (C6 opening a store that does not exist). The timeouts
    are short only with the fault proxy in the path, as ``open_standalone``'s are."""

    def remap(address: tuple[str, int]) -> tuple[str, int]:
        return ctx.route(address[0], address[1])

    timeout = float(CALM_TIMEOUT if ctx.route is identity_route else TIMEOUT)
    options: dict[str, Any] = {"namespace": namespace_of(ctx.store, run), **create_option(ctx)}
    if ctx.flavor == "async":
        return _async_cluster(host, port, remap, timeout, options)
    return _sync_cluster(host, port, remap, timeout, options)


@contextmanager
def _sync_cluster_cm(
    host: str, port: int, remap: Any, timeout: float, options: dict[str, Any]
) -> Any:
    client = redis.cluster.RedisCluster(
        host=host,
        port=port,
        address_remap=remap,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
    )
    try:
        with RedisLedger.from_client(client, **options) as ledger:
            yield ledger
    finally:
        client.close()


def _sync_cluster(
    host: str, port: int, remap: Any, timeout: float, options: dict[str, Any]
) -> AbstractContextManager[Any]:
    return _sync_cluster_cm(host, port, remap, timeout, options)


@asynccontextmanager
async def _async_cluster_cm(
    host: str, port: int, remap: Any, timeout: float, options: dict[str, Any]
) -> Any:
    client = redis.asyncio.cluster.RedisCluster(
        host=host,
        port=port,
        address_remap=remap,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
    )
    try:
        ledger = await AsyncRedisLedger.from_client(client, **options)
        try:
            yield ledger
        finally:
            await ledger.aclose()
    finally:
        await client.aclose()


def _async_cluster(
    host: str, port: int, remap: Any, timeout: float, options: dict[str, Any]
) -> AbstractAsyncContextManager[Any]:
    return _async_cluster_cm(host, port, remap, timeout, options)


class TestPlainRedis(LedgerConformance):
    @pytest.fixture
    def ledger_factory(self, redis_url: str) -> Any:
        return standalone_factory(redis_url)

    @pytest.fixture
    def ledger_restart(self, plain_restart: Callable[[], None] | None) -> Any:
        # A clean restart (SIGTERM) of the local server; the durable class kills -9.
        return plain_restart

    @pytest.fixture
    def ledger_forget(self, redis_url: str) -> Callable[[], object]:
        return forget_standalone(redis_url)

    @pytest.fixture
    def ledger_restore(self, redis_url: str) -> Restore:
        return Restore(redis_url)

    @pytest.fixture
    def ledger_after_restore(self, redis_url: str) -> AfterRestore:
        return AfterRestore(redis_url, namespace_of)

    def test_forget_hook_targets_the_server_under_test(
        self, ledger_forget: Forget, redis_url: str
    ) -> None:
        # Not run here (the suite's forget clause runs it last); see test_identity.py.
        assert ledger_forget.url == redis_url


class TestDurableRedis(LedgerConformance):
    """appendfsync no survives kill -9 but not a power loss: it proves only with
    durability=process, which is the claim this configuration tests."""

    @pytest.fixture
    def ledger_factory(self, page_cache_server: servers.RedisServer) -> Any:
        return standalone_factory(page_cache_server.url, durability="process")

    @pytest.fixture
    def ledger_restart(self, page_cache_server: servers.RedisServer) -> Callable[[], object]:
        return page_cache_server.restart  # kill -9, then start on the same port and files

    @pytest.fixture
    def ledger_forget(self, page_cache_server: servers.RedisServer) -> Callable[[], object]:
        return forget_standalone(page_cache_server.url)

    @pytest.fixture
    def ledger_restore(self, page_cache_server: servers.RedisServer) -> Restore:
        return Restore(page_cache_server.url)

    @pytest.fixture
    def ledger_after_restore(self, page_cache_server: servers.RedisServer) -> AfterRestore:
        return AfterRestore(page_cache_server.url, namespace_of, options={"durability": "process"})

    def test_forget_hook_targets_the_server_under_test(
        self, ledger_forget: Forget, page_cache_server: servers.RedisServer
    ) -> None:
        assert ledger_forget.url == page_cache_server.url


class TestAllkeysLruRedis(LedgerConformance):
    @pytest.fixture
    def ledger_factory(self, lru_server: servers.RedisServer) -> Any:
        return standalone_factory(lru_server.url)

    @pytest.fixture
    def ledger_restart(self, lru_server: servers.RedisServer) -> Callable[[], object]:
        return lru_server.graceful_restart

    @pytest.fixture
    def ledger_forget(self, lru_server: servers.RedisServer) -> Callable[[], object]:
        return forget_standalone(lru_server.url)

    def test_forget_hook_targets_the_server_under_test(
        self, ledger_forget: Forget, lru_server: servers.RedisServer
    ) -> None:
        assert ledger_forget.url == lru_server.url


class TestRedisCluster(LedgerConformance):
    @pytest.fixture
    def ledger_factory(self, cluster_url: str) -> Any:
        return cluster_factory(cluster_url)

    @pytest.fixture
    def ledger_restart(self, cluster_target: servers.ClusterTarget) -> Any:
        return cluster_target.restart  # every node: clean shutdown, start, cluster ok

    @pytest.fixture
    def ledger_forget(self, cluster_url: str) -> Callable[[], object]:
        return forget_cluster(cluster_url)

    @pytest.fixture
    def ledger_restore(self, cluster_url: str) -> Restore:
        return Restore(cluster_url, cluster=True)

    @pytest.fixture
    def ledger_after_restore(self, cluster_url: str) -> AfterRestore:
        return AfterRestore(cluster_url, namespace_of)

    def test_forget_hook_targets_the_server_under_test(
        self, ledger_forget: Forget, cluster_url: str
    ) -> None:
        assert ledger_forget.url == cluster_url
        assert ledger_forget.cluster
