"""``redis://``, ``rediss://``, ``unix://`` and ``redis+cluster://`` URLs -> ledgers.

Ledger options (``namespace``, ``timeout``, ``wait_replicas``...) are taken out of the
URL; the few driver options allowed in it (``db``, ``ssl_*``, ``client_name``) are left
for redis-py to parse. Clients built here have finite timeouts and no driver retries.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl, urlencode

from ledger_core.errors import InvalidLedgerURL
from ledger_core.opening import OpenRequest, Route, reroute_address
from ledger_core.urls import LedgerURL, check_options

from . import rules
from .driver import redis_module
from .ledger import AsyncRedisLedger, RedisLedger
from .rules import RedisOptions
from .transport import AsyncClusterIO, AsyncPoolIO, ClusterIO, PoolIO


def _parse(url: LedgerURL, options: Mapping[str, Any]) -> tuple[str, RedisOptions]:
    check_options(url, options, rules.LEDGER_OPTIONS | rules.DRIVER_URL_OPTIONS)
    for name in rules.DRIVER_URL_OPTIONS & set(options):
        if url.query.get(name) != options[name]:
            raise InvalidLedgerURL(f"driver option {name!r} goes in the URL query string")
    _check_driver_parts(url)
    return _driver_url(url), RedisOptions.from_mapping(options)


def _check_driver_parts(url: LedgerURL) -> None:
    """Refuse what redis-py would silently ignore or misread (a ledger in the wrong
    database is a different store): the database number and the pool size."""
    path = url.parts.path
    if url.scheme == "unix" and "@" in path:
        # redis-py quotes the socket path in its errors: never let a piece of a
        # password (a raw "/" in it) become one.
        raise InvalidLedgerURL(
            "the socket path of a unix:// URL contains '@': percent-encode a password "
            "that contains '/', '#', '?' or '@'"
        )
    if url.scheme != "unix":
        allowed = ("", "/", "/0") if url.scheme == "redis+cluster" else ("", "/")
        if path not in allowed and not re.fullmatch(r"/\d{1,5}", path):
            raise InvalidLedgerURL(f"the path of {_location(url)} must be a database number (/0)")
    for name in ("db", "max_connections"):
        value = url.query.get(name)
        if value is not None and not re.fullmatch(r"\d{1,6}", value):
            raise InvalidLedgerURL(f"option {name!r} must be a whole number, not {value!r}")
    if re.fullmatch(r"0+", url.query.get("max_connections", "1")):
        raise InvalidLedgerURL("option 'max_connections' must be at least 1")


def _driver_url(url: LedgerURL) -> str:
    """The raw URL minus the ledger's options, keeping ``scheme://`` (``unix:///path``)."""
    p = url.parts
    kept = [
        (k, v)
        for k, v in parse_qsl(p.query, keep_blank_values=True)
        if k not in rules.LEDGER_OPTIONS
    ]
    query = urlencode(kept)
    return f"{p.scheme}://{p.netloc}{p.path}" + (f"?{query}" if query else "")


def _location(url: LedgerURL) -> str:
    """Where the ledger points, for describe(), repr and errors: built from the parsed
    host, port and database only, so no password (or piece of one) can ever show,
    however the URL was written: a raw ``/``, ``#`` or ``?`` in a password moves the
    rest of it into the path, fragment or query, which are never shown unless they
    are plainly a database number or a socket path."""
    p = url.parts
    user = ""
    if p.username is not None or p.password is not None:
        user = f"{p.username or ''}{':***' if p.password is not None else ''}@"
    host = p.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        port = f":{p.port}" if p.port is not None else ""
    except ValueError:  # a password piece where the port should be
        port = ""
    path = p.path
    if url.scheme == "unix":
        shown = path if "@" not in p.netloc + path and p.password is None else "/..."
    else:
        shown = path if re.fullmatch(r"/?\d*", path) else "/..."
    return f"{url.scheme}://{user}{host}{port}{shown}"


def _driver_kwargs(opts: RedisOptions) -> dict[str, Any]:
    redis = redis_module()
    return {
        "socket_timeout": opts.timeout,
        "socket_connect_timeout": opts.connect_timeout,
        # The ledger resolves lost replies itself (C5); the driver must not resend.
        "retry": redis.retry.Retry(redis.backoff.NoBackoff(), 0),
    }


def _pool_kwargs(opts: RedisOptions) -> dict[str, Any]:
    # A bounded pool that makes callers wait for a free connection (at most `timeout`)
    # instead of failing at once when many tasks spend together.
    return {**_driver_kwargs(opts), "timeout": opts.timeout, "max_connections": 100}


def _cluster_url(raw: str) -> str:
    scheme, sep, rest = raw.partition("://")
    if scheme.lower() != "redis+cluster" or not sep:
        raise InvalidLedgerURL("expected a redis+cluster:// URL")
    return "redis://" + rest


def _driver_error(url: LedgerURL, exc: Exception) -> InvalidLedgerURL:
    # redis-py's message may quote the URL; never repeat it (the caller chains nothing).
    return InvalidLedgerURL(f"redis-py cannot use {_location(url)} ({type(exc).__name__})")


def _options(request: OpenRequest) -> dict[str, Any]:
    """The request as the option mapping this package's parser reads."""
    return {**request.options, "namespace": request.namespace}


class _RedisBackend:
    """Standalone Redis: one connection pool owned by the ledger."""

    def open(self, request: OpenRequest) -> RedisLedger:
        url, options = request.url, _options(request)
        raw, opts = _parse(url, options)
        redis = redis_module()
        try:
            pool = redis.BlockingConnectionPool.from_url(raw, **_pool_kwargs(opts))
        except (ValueError, TypeError) as exc:
            raise _driver_error(url, exc) from None
        return RedisLedger.open_on(
            PoolIO(pool, _location(url), budget=opts.timeout),
            namespace=options["namespace"],
            options=opts,
            on_close=pool.disconnect,
        )

    async def open_async(self, request: OpenRequest) -> AsyncRedisLedger:
        url, options = request.url, _options(request)
        raw, opts = _parse(url, options)
        redis = redis_module()
        try:
            pool = redis.asyncio.BlockingConnectionPool.from_url(raw, **_pool_kwargs(opts))
        except (ValueError, TypeError) as exc:
            raise _driver_error(url, exc) from None
        return await AsyncRedisLedger.open_on(
            AsyncPoolIO(pool, _location(url), budget=opts.timeout),
            namespace=options["namespace"],
            options=opts,
            on_close=pool.disconnect,
        )

    def reroute(self, url: LedgerURL, route: Route) -> str | None:
        """One host:port (``unix://`` has none)."""
        return None if url.scheme == "unix" else reroute_address(url, route, 6379)


class _ClusterBackend:
    """No ``reroute``: the nodes redirect clients to each other's own addresses."""

    """``redis+cluster://host:port`` (any node; the rest are discovered)."""

    def open(self, request: OpenRequest) -> RedisLedger:
        url, options = request.url, _options(request)
        raw, opts = _parse(url, options)
        redis = redis_module()
        try:
            cluster = redis.cluster.RedisCluster.from_url(
                _cluster_url(raw),
                socket_timeout=opts.timeout,
                socket_connect_timeout=opts.connect_timeout,
            )
        except (ValueError, TypeError) as exc:
            raise _driver_error(url, exc) from None
        except Exception as exc:  # RedisClusterException is no RedisError
            raise rules.driver_error(exc, "open", sent=False) from exc
        return RedisLedger.open_on(
            ClusterIO(cluster, _location(url)),
            namespace=options["namespace"],
            options=opts,
            on_close=cluster.close,
        )

    async def open_async(self, request: OpenRequest) -> AsyncRedisLedger:
        url, options = request.url, _options(request)
        raw, opts = _parse(url, options)
        redis = redis_module()
        try:
            cluster = redis.asyncio.cluster.RedisCluster.from_url(
                _cluster_url(raw),
                socket_timeout=opts.timeout,
                socket_connect_timeout=opts.connect_timeout,
            )
        except (ValueError, TypeError) as exc:
            raise _driver_error(url, exc) from None
        return await AsyncRedisLedger.open_on(
            AsyncClusterIO(cluster, _location(url)),
            namespace=options["namespace"],
            options=opts,
            on_close=cluster.aclose,
        )


BACKEND = _RedisBackend()
CLUSTER_BACKEND = _ClusterBackend()
