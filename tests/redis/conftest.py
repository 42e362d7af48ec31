"""Session-scoped Redis servers for the Redis backend's tests (see tests/servers/redis.py)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

import pytest
import redis

from tests.servers import redis as servers
from tests.servers.common import binary, serve_or_skip

T = TypeVar("T")


@pytest.fixture(scope="session")
def local_plain() -> Iterator[servers.RedisServer]:
    """A plain local server the tests may reconfigure (ACL users) or restart."""
    yield from serve_or_skip(lambda: servers.local_redis(servers.PLAIN))


@pytest.fixture(scope="session")
def redis_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """A plain server (``appendonly yes``, ``appendfsync always``, no eviction):
    ``LEDGER_TEST_REDIS_URL``, else the local one, else a container."""
    if os.environ.get(servers.PLAIN_ENV) or binary("redis-server") is None:
        yield from serve_or_skip(lambda: servers.redis_url(servers.PLAIN))
    else:
        local: servers.RedisServer = request.getfixturevalue("local_plain")
        yield local.url


@pytest.fixture(scope="session")
def plain_restart(request: pytest.FixtureRequest, redis_url: str) -> Callable[[], None] | None:
    """Restart the plain server cleanly, when it is ours."""
    if os.environ.get(servers.PLAIN_ENV) or binary("redis-server") is None:
        return None
    local: servers.RedisServer = request.getfixturevalue("local_plain")
    return local.graceful_restart


@pytest.fixture(scope="session")
def durable_server() -> Iterator[servers.RedisServer]:
    """``appendonly yes`` + ``appendfsync always``: survives kill -9."""
    yield from serve_or_skip(lambda: servers.local_redis(servers.DURABLE))


@pytest.fixture(scope="session")
def page_cache_server() -> Iterator[servers.RedisServer]:
    """``appendfsync no``: survives kill -9, proves only with durability=process."""
    yield from serve_or_skip(lambda: servers.local_redis(servers.PAGE_CACHE))


@pytest.fixture(scope="session")
def everysec_server() -> Iterator[servers.RedisServer]:
    """``appendfsync everysec``: may lose acknowledged spends in a kill -9: never proves."""
    yield from serve_or_skip(lambda: servers.local_redis(servers.EVERYSEC))


@pytest.fixture(scope="session")
def lru_server() -> Iterator[servers.RedisServer]:
    """``maxmemory-policy allkeys-lru``: can evict, so it never proves."""
    yield from serve_or_skip(lambda: servers.local_redis(servers.ALLKEYS_LRU))


@pytest.fixture(scope="session")
def lru_url(lru_server: servers.RedisServer) -> str:
    return lru_server.url


@pytest.fixture(scope="session")
def cluster_target() -> Iterator[servers.ClusterTarget]:
    """A 3-master Redis Cluster (and its restart, when local)."""
    yield from serve_or_skip(servers.cluster_target)


@pytest.fixture(scope="session")
def cluster_url(cluster_target: servers.ClusterTarget) -> str:
    """The Cluster's redis+cluster:// URL."""
    return cluster_target.url


@pytest.fixture
def namespace(request: pytest.FixtureRequest) -> str:
    """A namespace of its own for each test, so tests never see each other's ids."""
    return f"t-{request.node.name}"[:200]


@pytest.fixture(scope="session")
def primary_and_replica() -> Iterator[tuple[servers.RedisServer, servers.RedisServer]]:
    """A primary and a replica of it, synced (for WAIT)."""
    try:
        primary_cm = servers.local_redis(servers.PLAIN)
        primary = primary_cm.__enter__()
    except servers.ServerUnavailable as exc:
        pytest.skip(str(exc))
    try:
        with servers.local_redis(
            (*servers.PLAIN, "--replicaof", "127.0.0.1", str(primary.port))
        ) as replica:
            client = redis.Redis(port=replica.port)
            deadline = time.monotonic() + 10
            while client.info("replication").get("master_link_status") != "up":
                assert time.monotonic() < deadline, "the replica never synced"
                time.sleep(0.02)
            client.close()
            yield primary, replica
    finally:
        primary_cm.__exit__(None, None, None)
