"""The sync and async Redis ledgers: thin shells over :mod:`.rules` and a transport."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from typing import Any, NoReturn

from ledger_core.base import AsyncLedgerBase, LedgerBase
from ledger_core.errors import InvalidLedgerURL, LedgerError
from ledger_core.ids import DEFAULT_NAMESPACE, MarkerKind, validate_namespace, validate_request_id
from ledger_core.steps import run_steps, run_steps_async
from ledger_core.tokens import new_token

from . import decisions, rules
from .driver import redis_module
from .rules import IdentityLost, RedisOptions
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


class _State:
    """What both shells keep: the plan, the info, the re-check clock, and the failure
    that keeps a ledger closed once its store forgot or changed (never a new identity)."""

    _opened: decisions.Opened
    _recheck: rules.Recheck
    _failed: LedgerError | None

    def _init_state(self, opened: decisions.Opened) -> None:
        self._opened = opened
        self._plan = opened.plan
        self._info = opened.info
        self._recheck = rules.Recheck(opened.options.recheck_interval)
        self._failed = None

    def _raise_if_failed(self) -> None:
        if self._failed is not None:
            raise type(self._failed)(str(self._failed)) from self._failed

    def _fail(self, exc: LedgerError) -> LedgerError:
        self._failed = exc
        return exc

    def _listing_failed(self, exc: Exception) -> NoReturn:
        """A listing page failed: a forgotten store fails the ledger for good."""
        if isinstance(exc, IdentityLost):
            raise self._fail(exc)
        if isinstance(exc, LedgerError):
            raise exc
        raise decisions.unexpected(exc, "spent_ids", spend=False) from exc


class RedisLedger(_State, LedgerBase):
    """A sync ledger in Redis: one genesis-proving script per spend or read, never an
    expiry.

    Open one with ``open_ledger("redis://...")`` or :meth:`from_client`. Spends and
    reads are one round trip each (plus one ``WAIT`` in the same trip when asked), and
    one configuration re-check trip at most every ``recheck_interval`` seconds.
    """

    def __init__(
        self,
        io: SyncIO,
        opened: decisions.Opened,
        *,
        on_close: Callable[[], None] | None = None,
    ) -> None:
        self._io = io
        self._perform = _performer(io)
        self._init_state(opened)
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
        """Read the server's facts and the namespace's identity (C6)."""
        steps = decisions.open_steps(
            namespace, options, cluster=isinstance(io, ClusterIO), location=io.location
        )
        try:
            perform = _performer(io)
            opened = run_steps(steps, lambda request: perform(request, None))
        except BaseException as exc:
            if on_close is not None:
                on_close()
            if isinstance(exc, Exception) and not isinstance(exc, LedgerError):
                raise decisions.unexpected(exc, "open", spend=False) from exc
            raise
        return cls(io, opened, on_close=on_close)

    def _run(self, steps: decisions.Steps, what: str, *, spend: bool) -> Any:
        self._raise_if_failed()
        deadline = _deadline(self._io.budget)

        def perform(request: decisions.Request) -> Any:
            return self._perform(request, deadline)

        try:
            if self._recheck.due():
                try:
                    changed = run_steps(decisions.recheck_steps(self._opened), perform)
                except BaseException:
                    self._recheck.failed()
                    raise
                if changed is not None:
                    raise self._fail(changed)
            return run_steps(steps, perform)
        except IdentityLost as exc:
            self._fail(exc)
            raise
        except LedgerError:
            raise
        except Exception as exc:
            raise decisions.unexpected(exc, what, spend=spend) from exc

    def _spend(self, request_id: bytes) -> bool:
        steps = decisions.spend_steps(self._plan, request_id, new_token())
        won: bool = self._run(steps, "spend", spend=True)
        return won

    def _is_spent(self, request_id: bytes) -> bool:
        spent: bool = self._run(
            decisions.read_steps(self._plan, request_id), "is_spent", spend=False
        )
        return spent

    def spend_many(self, request_ids: Sequence[str]) -> list[bool]:
        """Spend a batch, pipelined (1000 scripts per trip; one command per trip on a
        Cluster): each answer is what :meth:`spend` would say."""
        raws = [validate_request_id(r) for r in request_ids]
        if isinstance(self._io, ClusterIO):
            return [self._spend(raw) for raw in raws]
        out: list[bool] = []
        for steps in decisions.spend_many_batches(self._plan, raws):
            out += self._run(steps, "spend_many", spend=True)
        return out

    def spent_ids(self, count: int = 1000) -> Iterator[str]:
        """Every id spent in this namespace, streamed by ``SCAN`` pages of ``count``
        (every master of a Cluster); markers and other namespaces are never listed."""
        return self._scan(decisions.Listing(self._plan, self._io.nodes(), count))

    def lineage(self) -> list[str]:
        """The store_ids this store was migrated from (its lineage markers)."""
        listing = decisions.Listing(self._plan, self._io.nodes(), 1000, MarkerKind.LINEAGE)
        return sorted(self._scan(listing))

    def _scan(self, listing: decisions.Listing) -> Iterator[str]:
        self._raise_if_failed()
        keys = self._plan.keys
        while (page := listing.next_page()) is not None:
            try:
                reply = self._io.scan(*page, keys.genesis, listing.pattern, listing.count)
                ids = listing.take(*reply)
            except Exception as exc:
                self._listing_failed(exc)
            yield from ids

    def close(self) -> None:
        if not self._io.closed:
            self._io.close()
            if self._on_close is not None:
                self._on_close()


class AsyncRedisLedger(_State, AsyncLedgerBase):
    """The asyncio face of :class:`RedisLedger` (``redis.asyncio``), same semantics (C9)."""

    def __init__(
        self,
        io: AsyncIO,
        opened: decisions.Opened,
        *,
        on_close: Callable[[], Any] | None = None,
    ) -> None:
        self._io = io
        self._perform = _async_performer(io)
        self._init_state(opened)
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
        steps = decisions.open_steps(
            namespace, options, cluster=isinstance(io, AsyncClusterIO), location=io.location
        )
        try:
            aperform = _async_performer(io)
            opened = await run_steps_async(steps, lambda request: aperform(request, None))
        except BaseException as exc:
            if on_close is not None:
                await on_close()
            if isinstance(exc, Exception) and not isinstance(exc, LedgerError):
                raise decisions.unexpected(exc, "open", spend=False) from exc
            raise
        return cls(io, opened, on_close=on_close)

    async def _run(self, steps: decisions.Steps, what: str, *, spend: bool) -> Any:
        self._raise_if_failed()
        deadline = _deadline(self._io.budget)

        async def perform(request: decisions.Request) -> Any:
            return await self._perform(request, deadline)

        try:
            if self._recheck.due():
                try:
                    changed = await run_steps_async(decisions.recheck_steps(self._opened), perform)
                except BaseException:
                    self._recheck.failed()
                    raise
                if changed is not None:
                    raise self._fail(changed)
            return await run_steps_async(steps, perform)
        except IdentityLost as exc:
            self._fail(exc)
            raise
        except LedgerError:
            raise
        except Exception as exc:
            raise decisions.unexpected(exc, what, spend=spend) from exc

    async def _spend(self, request_id: bytes) -> bool:
        steps = decisions.spend_steps(self._plan, request_id, new_token())
        won: bool = await self._run(steps, "spend", spend=True)
        return won

    async def _is_spent(self, request_id: bytes) -> bool:
        steps = decisions.read_steps(self._plan, request_id)
        spent: bool = await self._run(steps, "is_spent", spend=False)
        return spent

    async def spend_many(self, request_ids: Sequence[str]) -> list[bool]:
        """Spend a batch, pipelined (1000 scripts per trip; one command per trip on a
        Cluster): each answer is what :meth:`spend` would say."""
        raws = [validate_request_id(r) for r in request_ids]
        if isinstance(self._io, AsyncClusterIO):
            return [await self._spend(raw) for raw in raws]
        out: list[bool] = []
        for steps in decisions.spend_many_batches(self._plan, raws):
            out += await self._run(steps, "spend_many", spend=True)
        return out

    def spent_ids(self, count: int = 1000) -> AsyncIterator[str]:
        """The asyncio face of :meth:`RedisLedger.spent_ids`."""
        return self._scan(decisions.Listing(self._plan, self._io.nodes(), count))

    async def lineage(self) -> list[str]:
        listing = decisions.Listing(self._plan, self._io.nodes(), 1000, MarkerKind.LINEAGE)
        return sorted([source async for source in self._scan(listing)])

    async def _scan(self, listing: decisions.Listing) -> AsyncIterator[str]:
        self._raise_if_failed()
        keys = self._plan.keys
        while (page := listing.next_page()) is not None:
            try:
                reply = await self._io.scan(*page, keys.genesis, listing.pattern, listing.count)
                ids = listing.take(*reply)
            except Exception as exc:
                self._listing_failed(exc)
            for request_id in ids:
                yield request_id

    async def aclose(self) -> None:
        if not self._io.closed:
            self._io.close()
            if self._on_close is not None:
                await self._on_close()


def _deadline(budget: float | None) -> float | None:
    """When the whole operation must be over (its re-check and retries included)."""
    return None if budget is None else time.monotonic() + budget


def _performer(io: SyncIO) -> Callable[[decisions.Request, float | None], Any]:
    def perform(request: decisions.Request, deadline: float | None = None) -> Any:
        kind, commands, what = request
        if kind == decisions.FACTS:
            return io.facts(deadline)
        assert commands is not None
        return io.call(commands, what, deadline)

    return perform


def _async_performer(
    io: AsyncIO,
) -> Callable[[decisions.Request, float | None], Awaitable[Any]]:
    async def perform(request: decisions.Request, deadline: float | None = None) -> Any:
        kind, commands, what = request
        if kind == decisions.FACTS:
            return await io.facts(deadline)
        assert commands is not None
        return await io.call(commands, what, deadline)

    return perform


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
    raise InvalidLedgerURL(
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
    raise InvalidLedgerURL(
        "expected a redis.asyncio Redis, ConnectionPool or RedisCluster, "
        f"not {type(client).__name__}"
    )
