"""Redis URL requests -> ledgers. redis-py is imported only when one is opened; the
clients built here have finite timeouts and no driver retries."""

from __future__ import annotations

from typing import Any

from ledger_core.errors import InvalidLedgerURL
from ledger_core.opening import OpenRequest
from ledger_core.urls import LedgerURL

from .errors import driver_error, redis_module, url_refused
from .options import Target, parse

# The target, the ledger's link to it (``Pool`` or ``Cluster`` of the flavour asked), and
# what closes the client.
Opening = tuple[Target, Any, Any]


def _target(request: OpenRequest, *, cluster: bool) -> Target:
    target = parse(request)
    if target.cluster != cluster:
        raise InvalidLedgerURL(
            "expected a redis+cluster:// URL" if cluster else "not a Cluster URL"
        )
    return target


def _client(target: Target, factory: Any, url: LedgerURL, **kwargs: Any) -> Any:
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


# The ledger resolves lost replies itself (C5); the driver must never resend. An asyncio
# client takes the asyncio Retry (a sync one is converted, with a UserWarning).
def _no_retry(*, aio: bool) -> Any:
    redis = redis_module()
    retry = redis.asyncio.retry if aio else redis.retry
    return retry.Retry(redis.backoff.NoBackoff(), 0)


def _flavour(aio: bool) -> Any:
    """The ledger module of that flavour (its ``Pool``, ``Cluster``, ledger class)."""
    if aio:
        from . import aio as flavour
    else:
        from . import ledger as flavour  # type: ignore[no-redef]
    return flavour


class _RedisBackend:
    testing = "ledger_redis.testing:HOOKS"

    def _pool(self, target: Target, url: LedgerURL, *, aio: bool) -> Any:
        """Blocking: callers wait for a free connection instead of failing at once."""
        redis = redis_module()
        factory = (redis.asyncio if aio else redis).BlockingConnectionPool.from_url
        timeout = target.options.timeout
        return _client(
            target, factory, url, retry=_no_retry(aio=aio), timeout=timeout, max_connections=100
        )

    def transport(self, request: OpenRequest, *, aio: bool = False) -> Opening:
        target = _target(request, cluster=False)
        pool = self._pool(target, request.url, aio=aio)
        link = _flavour(aio).Pool(pool, target.location, budget=target.options.timeout)
        return target, link, pool.disconnect

    def preflight(self, request: OpenRequest) -> list[Any]:
        """``decision-ledger doctor`` on a store not set up yet: the server's settings."""
        from .ledger import preflight_checks

        target, link, close = self.transport(request)
        try:
            return preflight_checks(link, target.options)
        finally:
            close()

    def open(self, request: OpenRequest) -> Any:
        from .ledger import RedisLedger

        target, link, close = self.transport(request)
        return RedisLedger.open_on(
            link, namespace=target.namespace, options=target.options, on_close=close
        )

    async def open_async(self, request: OpenRequest) -> Any:
        from .aio import AsyncRedisLedger

        target, link, close = self.transport(request, aio=True)
        return await AsyncRedisLedger.open_on(
            link, namespace=target.namespace, options=target.options, on_close=close
        )


class _ClusterBackend(_RedisBackend):
    testing = "ledger_redis.testing:CLUSTER_HOOKS"

    def transport(self, request: OpenRequest, *, aio: bool = False) -> Opening:
        target = _target(request, cluster=True)
        redis = redis_module()
        factory = (redis.asyncio if aio else redis).cluster.RedisCluster.from_url
        cluster = _client(target, factory, request.url)
        link = _flavour(aio).Cluster(cluster, target.location, target.options.timeout)
        return target, link, cluster.aclose if aio else cluster.close


class _SentinelBackend(_RedisBackend):
    testing = "ledger_redis.testing:SENTINEL_HOOKS"

    def _pool(self, target: Target, url: LedgerURL, *, aio: bool) -> Any:
        redis = redis_module()
        flavour = (redis.asyncio if aio else redis).sentinel
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
        sentinel_kwargs = {**seconds, **target.sentinel_auth}
        manager = flavour.Sentinel(list(target.sentinels), sentinel_kwargs=sentinel_kwargs)
        return flavour.SentinelConnectionPool(
            target.service,
            manager,
            retry=_no_retry(aio=aio),
            max_connections=100,
            **seconds,
            **kwargs,
        )


BACKEND = _RedisBackend()
SENTINEL_BACKEND = _SentinelBackend()
CLUSTER_BACKEND = _ClusterBackend()
