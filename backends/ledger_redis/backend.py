"""``redis://``, ``rediss://``, ``unix://`` and ``redis+cluster://`` requests -> ledgers.

The request is parsed by :func:`.options.parse` (no I/O); redis-py is imported only
here, when a ledger is opened (``MissingDriver`` names the extra otherwise). Clients
built here have finite timeouts and no driver retries.
"""

from __future__ import annotations

from typing import Any

from ledger_core.errors import InvalidLedgerURL
from ledger_core.opening import OpenRequest, Route, reroute_address
from ledger_core.scratch import require_scratch_prefix
from ledger_core.urls import LedgerURL

from .driver import redis_module
from .errors import driver_error, url_refused
from .options import Target, parse


def _target(request: OpenRequest, *, cluster: bool) -> Target:
    target = parse(request)
    if target.cluster != cluster:
        raise InvalidLedgerURL(
            "expected a redis+cluster:// URL" if cluster else "not a Cluster URL"
        )
    return target


def _client(target: Target, factory: Any, url: LedgerURL, **kwargs: Any) -> Any:
    """A redis-py pool or Cluster client from ``factory`` (``from_url``), with the
    ledger's socket timeouts; redis-py's refusal never quotes the URL."""
    try:
        return factory(
            target.driver_url,
            socket_timeout=target.options.timeout,
            socket_connect_timeout=target.options.connect_timeout,
            **kwargs,
        )
    except (ValueError, TypeError) as exc:
        raise url_refused(url, exc) from None
    except Exception as exc:  # RedisClusterException is no RedisError
        raise driver_error(exc, "open", sent=False) from exc


def _pool(target: Target, pool_type: Any, url: LedgerURL) -> Any:
    """A bounded pool that makes callers wait for a free connection (at most
    ``timeout``) instead of failing at once when many tasks spend together."""
    redis = redis_module()
    return _client(
        target,
        pool_type.from_url,
        url,
        # The ledger resolves lost replies itself (C5); the driver must not resend.
        retry=redis.retry.Retry(redis.backoff.NoBackoff(), 0),
        timeout=target.options.timeout,
        max_connections=100,
    )


class _RedisBackend:
    """Standalone Redis: one connection pool owned by the ledger."""

    def _pool(self, target: Target, url: LedgerURL, *, aio: bool) -> Any:
        redis = redis_module()
        module = redis.asyncio if aio else redis
        return _pool(target, module.BlockingConnectionPool, url)

    def open(self, request: OpenRequest) -> Any:
        from .ledger import RedisLedger
        from .transport import PoolTransport

        target = _target(request, cluster=False)
        pool = self._pool(target, request.url, aio=False)
        transport = PoolTransport(pool, target.location, budget=target.options.timeout)
        return RedisLedger.open_on(
            transport, namespace=target.namespace, options=target.options, on_close=pool.disconnect
        )

    async def open_async(self, request: OpenRequest) -> Any:
        from .aio import AsyncRedisLedger
        from .transport import PoolTransport

        target = _target(request, cluster=False)
        pool = self._pool(target, request.url, aio=True)
        transport = PoolTransport(pool, target.location, budget=target.options.timeout)
        return await AsyncRedisLedger.open_on(
            transport, namespace=target.namespace, options=target.options, on_close=pool.disconnect
        )

    def remove_scratch(self, url: LedgerURL, prefix: str) -> int:
        """Remove every genesis and record key of the namespaces named ``prefix...`` (a
        check's own scratch prefix, else refused before any I/O): ``SCAN MATCH`` pages,
        each ``UNLINK``ed; how many namespaces. The URL's own options and timeouts; the
        pool is closed after."""
        from .ledger import remove_scratch
        from .transport import PoolTransport

        checked = require_scratch_prefix(prefix)
        target = _target(OpenRequest.build(url, create=False), cluster=False)
        pool = _pool(target, redis_module().BlockingConnectionPool, url)
        transport = PoolTransport(pool, target.location, budget=target.options.timeout)
        try:
            return remove_scratch(transport, checked)
        finally:
            transport.close()
            pool.disconnect()

    def reroute(self, url: LedgerURL, route: Route) -> str | None:
        """One host:port (``unix://`` has none)."""
        return None if url.scheme == "unix" else reroute_address(url, route, 6379)


class _ClusterBackend:
    """``redis+cluster://host:port`` (any node; the rest are discovered). No
    ``reroute``: the nodes redirect clients to each other's own addresses."""

    def open(self, request: OpenRequest) -> Any:
        from .ledger import RedisLedger
        from .transport import ClusterTransport

        target = _target(request, cluster=True)
        cluster = _client(target, redis_module().cluster.RedisCluster.from_url, request.url)
        return RedisLedger.open_on(
            ClusterTransport(cluster, target.location, target.options.timeout),
            namespace=target.namespace,
            options=target.options,
            on_close=cluster.close,
        )

    async def open_async(self, request: OpenRequest) -> Any:
        from .aio import AsyncRedisLedger
        from .transport import ClusterTransport

        target = _target(request, cluster=True)
        cluster = _client(target, redis_module().asyncio.cluster.RedisCluster.from_url, request.url)
        return await AsyncRedisLedger.open_on(
            ClusterTransport(cluster, target.location, target.options.timeout),
            namespace=target.namespace,
            options=target.options,
            on_close=cluster.aclose,
        )

    def remove_scratch(self, url: LedgerURL, prefix: str) -> int:
        """:meth:`_RedisBackend.remove_scratch` on every master of the Cluster."""
        from .ledger import remove_scratch
        from .transport import ClusterTransport

        checked = require_scratch_prefix(prefix)
        target = _target(OpenRequest.build(url, create=False), cluster=True)
        cluster = _client(target, redis_module().cluster.RedisCluster.from_url, url)
        try:
            transport = ClusterTransport(cluster, target.location, target.options.timeout)
            return remove_scratch(transport, checked)
        finally:
            cluster.close()


def _sentinel_pool(target: Target, flavour: Any, url: LedgerURL) -> Any:
    """A pool on the master the Sentinels name (asked again for every new connection,
    so it follows a failover), with the ledger's timeouts and no driver retries."""
    redis = redis_module()
    seconds = {
        "socket_timeout": target.options.timeout,
        "socket_connect_timeout": target.options.connect_timeout,
    }
    try:
        kwargs = redis.connection.parse_url(target.driver_url)
    except (ValueError, TypeError) as exc:
        raise url_refused(url, exc) from None
    kwargs.pop("host", None)
    kwargs.pop("port", None)
    manager = flavour.Sentinel(list(target.sentinels), sentinel_kwargs=dict(seconds))
    return flavour.SentinelConnectionPool(
        target.service,
        manager,
        retry=redis.retry.Retry(redis.backoff.NoBackoff(), 0),
        max_connections=100,
        **seconds,
        **kwargs,
    )


class _SentinelBackend(_RedisBackend):
    """``redis+sentinel://``: the master a quorum of Sentinels names, followed across
    failovers (each new connection asks them); the same ledger as standalone."""

    def _pool(self, target: Target, url: LedgerURL, *, aio: bool) -> Any:
        redis = redis_module()
        return _sentinel_pool(target, (redis.asyncio if aio else redis).sentinel, url)

    def reroute(self, url: LedgerURL, route: Route) -> str | None:
        """None: the Sentinels hand out the master's own address."""
        return None


BACKEND = _RedisBackend()
SENTINEL_BACKEND = _SentinelBackend()
CLUSTER_BACKEND = _ClusterBackend()
