"""The sync and async Redis ledgers: thin shells over :mod:`.rules` and a transport."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ledger_core.base import AsyncLedgerBase, LedgerBase
from ledger_core.errors import InvalidLedgerURL, LedgerError
from ledger_core.ids import DEFAULT_NAMESPACE, validate_namespace
from ledger_core.protocol import LedgerInfo
from ledger_core.tokens import new_token

from . import rules
from .driver import redis_module
from .rules import RedisOptions, ReplyLost, SpendPlan, exists_reply, record_key
from .transport import AsyncClusterIO, AsyncPoolIO, ClusterIO, PoolIO

SyncIO = PoolIO | ClusterIO
AsyncIO = AsyncPoolIO | AsyncClusterIO

# A client the host gives keeps its own timeouts and connection settings.
_CLIENT_OPTIONS = rules.LEDGER_OPTIONS - {"timeout", "connect_timeout"}


def _client_options(options: Mapping[str, Any]) -> RedisOptions:
    unknown = sorted(set(options) - _CLIENT_OPTIONS)
    if unknown:
        raise InvalidLedgerURL(
            f"unknown option(s) {', '.join(map(repr, unknown))} for a Redis ledger on a "
            f"client (known: {', '.join(sorted(_CLIENT_OPTIONS))})"
        )
    return RedisOptions.from_mapping(options)


class RedisLedger(LedgerBase):
    """A sync ledger in Redis: ``SETNX`` of a fresh attempt token, never an expiry.

    Open one with ``open_ledger("redis://...")`` or :meth:`from_client`. Spends and
    reads are one round trip each (plus one ``WAIT`` in the same trip when asked).
    """

    def __init__(
        self,
        io: SyncIO,
        plan: SpendPlan,
        info: LedgerInfo,
        *,
        on_close: Callable[[], None] | None = None,
    ) -> None:
        self._io = io
        self._plan = plan
        self._info = info
        self._namespace = info.namespace
        self._on_close = on_close

    @classmethod
    def from_client(
        cls, client: Any, *, namespace: str = DEFAULT_NAMESPACE, **options: Any
    ) -> RedisLedger:
        """A ledger on a redis-py ``Redis``, ``ConnectionPool`` or ``RedisCluster`` the
        host already has; the ledger never closes it."""
        opts = _client_options(options)
        return cls.open_on(_sync_io(client), namespace=validate_namespace(namespace), options=opts)

    @classmethod
    def open_on(
        cls,
        io: SyncIO,
        *,
        namespace: str,
        options: RedisOptions,
        on_close: Callable[[], None] | None = None,
    ) -> RedisLedger:
        """Read the server's facts and the namespace's identity, once (C6)."""
        try:
            cluster = isinstance(io, ClusterIO)
            facts = io.facts()
            plan = SpendPlan.build(options, rules.server_version(facts), driver_retries=cluster)
            rules.check_topology(facts, options, cluster=cluster)
            verdict = rules.judge(facts, options)
            genesis = None
            if verdict.reason is None:
                genesis = io.genesis(rules.genesis_key(namespace), rules.new_genesis())
            info = rules.ledger_info(
                kind="redis-cluster" if cluster else "redis",
                location=io.location,
                namespace=namespace,
                genesis=genesis,
                verdict=verdict,
            )
        except BaseException:
            if on_close is not None:
                on_close()
            raise
        return cls(io, plan, info, on_close=on_close)

    def _spend(self, request_id: bytes) -> bool:
        key = record_key(self._namespace, request_id)
        token = new_token()
        try:
            replies = self._io.call(self._plan.spend_commands(key, token), "spend")
        except ReplyLost as failure:
            return self._resolve(key, token, failure)
        return self._plan.spend_outcome(replies, token)

    def _resolve(self, key: bytes, token: bytes, failure: ReplyLost) -> bool:
        # C5: the same token again; the reply says whose write is stored.
        try:
            replies = self._io.call(self._plan.resolve_commands(key, token), "spend (resolve)")
        except LedgerError as exc:
            raise rules.ambiguous(failure, exc) from failure
        return self._plan.resolve_outcome(replies, token, failure)

    def _is_spent(self, request_id: bytes) -> bool:
        key = record_key(self._namespace, request_id)
        return exists_reply(self._io.call([("EXISTS", key)], "is_spent")[0])

    def close(self) -> None:
        if not self._io.closed:
            self._io.close()
            if self._on_close is not None:
                self._on_close()


class AsyncRedisLedger(AsyncLedgerBase):
    """The asyncio face of :class:`RedisLedger` (``redis.asyncio``), same semantics (C9)."""

    def __init__(
        self,
        io: AsyncIO,
        plan: SpendPlan,
        info: LedgerInfo,
        *,
        on_close: Callable[[], Any] | None = None,
    ) -> None:
        self._io = io
        self._plan = plan
        self._info = info
        self._namespace = info.namespace
        self._on_close = on_close

    @classmethod
    async def from_client(
        cls, client: Any, *, namespace: str = DEFAULT_NAMESPACE, **options: Any
    ) -> AsyncRedisLedger:
        """A ledger on a ``redis.asyncio`` client, pool or Cluster client the host
        already has; the ledger never closes it."""
        opts = _client_options(options)
        return await cls.open_on(
            _async_io(client), namespace=validate_namespace(namespace), options=opts
        )

    @classmethod
    async def open_on(
        cls,
        io: AsyncIO,
        *,
        namespace: str,
        options: RedisOptions,
        on_close: Callable[[], Any] | None = None,
    ) -> AsyncRedisLedger:
        try:
            cluster = isinstance(io, AsyncClusterIO)
            facts = await io.facts()
            plan = SpendPlan.build(options, rules.server_version(facts), driver_retries=cluster)
            rules.check_topology(facts, options, cluster=cluster)
            verdict = rules.judge(facts, options)
            genesis = None
            if verdict.reason is None:
                genesis = await io.genesis(rules.genesis_key(namespace), rules.new_genesis())
            info = rules.ledger_info(
                kind="redis-cluster" if cluster else "redis",
                location=io.location,
                namespace=namespace,
                genesis=genesis,
                verdict=verdict,
            )
        except BaseException:
            if on_close is not None:
                await on_close()
            raise
        return cls(io, plan, info, on_close=on_close)

    async def _spend(self, request_id: bytes) -> bool:
        key = record_key(self._namespace, request_id)
        token = new_token()
        try:
            replies = await self._io.call(self._plan.spend_commands(key, token), "spend")
        except ReplyLost as failure:
            return await self._resolve(key, token, failure)
        return self._plan.spend_outcome(replies, token)

    async def _resolve(self, key: bytes, token: bytes, failure: ReplyLost) -> bool:
        try:
            replies = await self._io.call(
                self._plan.resolve_commands(key, token), "spend (resolve)"
            )
        except LedgerError as exc:
            raise rules.ambiguous(failure, exc) from failure
        return self._plan.resolve_outcome(replies, token, failure)

    async def _is_spent(self, request_id: bytes) -> bool:
        key = record_key(self._namespace, request_id)
        return exists_reply((await self._io.call([("EXISTS", key)], "is_spent"))[0])

    async def aclose(self) -> None:
        if not self._io.closed:
            self._io.close()
            if self._on_close is not None:
                await self._on_close()


def _describe_client(client: Any) -> str:
    """Where a host's client points, without any credential."""
    kwargs: Mapping[str, Any] = {}
    pool = getattr(client, "connection_pool", client)
    getter = getattr(pool, "connection_kwargs", None)
    if isinstance(getter, Mapping):
        kwargs = getter
    if "path" in kwargs:
        return f"unix://{kwargs['path']}"
    if "host" in kwargs:
        return f"redis://{kwargs['host']}:{kwargs.get('port', 6379)}/{kwargs.get('db', 0)}"
    return f"<{type(client).__name__}>"


def _sync_io(client: Any) -> SyncIO:
    redis = redis_module()
    if isinstance(client, redis.cluster.RedisCluster):
        nodes = client.get_nodes()
        where = f"redis+cluster://{nodes[0].name}" if nodes else "redis+cluster://"
        return ClusterIO(client, where)
    if isinstance(client, redis.Redis):
        return PoolIO(client.connection_pool, _describe_client(client))
    if isinstance(client, redis.ConnectionPool):
        return PoolIO(client, _describe_client(client))
    raise TypeError(
        f"expected a redis-py Redis, ConnectionPool or RedisCluster, not {type(client).__name__}"
    )


def _async_io(client: Any) -> AsyncIO:
    redis = redis_module()
    if isinstance(client, redis.asyncio.cluster.RedisCluster):
        nodes = client.get_nodes()
        where = f"redis+cluster://{nodes[0].name}" if nodes else "redis+cluster://"
        return AsyncClusterIO(client, where)
    if isinstance(client, redis.asyncio.Redis):
        return AsyncPoolIO(client.connection_pool, _describe_client(client))
    if isinstance(client, redis.asyncio.ConnectionPool):
        return AsyncPoolIO(client, _describe_client(client))
    raise TypeError(
        "expected a redis.asyncio Redis, ConnectionPool or RedisCluster, "
        f"not {type(client).__name__}"
    )
