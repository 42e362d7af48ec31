"""How commands reach Redis: four thin shells (standalone or Cluster, sync or async).

Standalone ledgers borrow one connection from a redis-py pool per exchange and speak
on it directly. That is what lets a failure be told apart precisely: a pool that
cannot hand out a connected connection has sent nothing (``LedgerUnavailable``), a
failure after sending is a lost reply (``ReplyLost``, which a spend resolves), and no
layer in between resends a command behind the ledger's back. Commands of one exchange
share one trip (a spend and its ``WAIT`` are pipelined).

Cluster ledgers go through redis-py's Cluster client, which follows ``MOVED``/``ASK``
and retries on its own; its spends therefore use ``SET NX GET``, which a resend cannot
fool (see :class:`rules.SpendPlan`). Every failure there counts as possibly sent.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

from ledger_core.errors import LedgerClosed, LedgerUnavailable, UnsafeStoreConfig

from .rules import Command, ServerFacts, as_eval, driver_error, facts_from, io_errors


def _first_error(replies: list[Any], what: str) -> list[Any]:
    """Raise the first command's error reply; later replies are the plan's to judge
    (a ``WAIT`` that fails after the write landed is not a plain refusal)."""
    first = replies[0]
    if isinstance(first, Exception):
        raise driver_error(first, what, sent=True) from first
    return replies


def _options(command: Command) -> dict[str, Any]:
    # redis-py parses replies by command name; SET with GET must come back raw.
    return {"get": True} if command[0] == "SET" and "GET" in command else {}


class PoolIO:
    """Standalone, sync: one pooled connection per exchange (never the caller's retries).

    ``budget``: seconds one ledger operation may take in all (its re-check, its trips,
    a ``NOSCRIPT`` resend, the resolving retry): no trip starts after it ran out, and a
    trip started in time is bounded by the socket timeout, so an operation ends within
    ``budget`` + ``timeout``. ``None`` for a host's client, which keeps its own timeouts.
    Reads never pass ``read_response(timeout=...)``: redis-py's asyncio connection
    answers ``None`` when that timeout expires, which a spend would read as "written
    now" (a double spend); the socket timeout raises instead.
    """

    def __init__(self, pool: Any, location: str, budget: float | None = None) -> None:
        if getattr(pool, "cache", None) is not None:
            raise UnsafeStoreConfig("a pool with client-side caching could serve stale reads")
        self.budget = budget
        self._pool = pool
        self._errors = io_errors()
        self._response_error = _response_error()
        self._noscript = _noscript_error()
        self.location = location
        self.closed = False

    def exchange(
        self, commands: Sequence[Command], what: str, deadline: float | None = None
    ) -> list[Any]:
        """Send ``commands`` in one trip; each reply, or the server's error for it."""
        if self.closed:
            raise LedgerClosed("the ledger is closed")
        if _left(deadline) == 0.0:  # no new trip (nor a new connection) after the budget
            raise LedgerUnavailable(f"{what}: the operation's timeout ran out before sending")
        try:
            conn = self._pool.get_connection()
        except self._errors as exc:
            raise driver_error(exc, what, sent=False) from exc
        if _left(deadline) == 0.0:
            self._pool.release(conn)
            raise LedgerUnavailable(f"{what}: the operation's timeout ran out before sending")
        try:
            if len(commands) == 1:
                conn.send_command(*commands[0])
            else:
                conn.send_packed_command(conn.pack_commands(commands))
            replies: list[Any] = []
            for _ in commands:
                try:
                    replies.append(conn.read_response(disable_decoding=True))
                except self._response_error as exc:
                    replies.append(exc)  # the connection stays in step: read the rest
            return replies
        except BaseException as exc:
            conn.disconnect()  # failed or interrupted mid-exchange: never reuse it
            if isinstance(exc, self._errors):
                raise driver_error(exc, what, sent=True) from exc
            raise
        finally:
            self._pool.release(conn)

    def call(
        self, commands: Sequence[Command], what: str, deadline: float | None = None
    ) -> list[Any]:
        replies = self.exchange(commands, what, deadline)
        if _noscript(commands, replies, self._noscript):
            replies = self.exchange(as_eval(commands), what, deadline)
        return _first_error(replies, what)

    def facts(self, deadline: float | None = None) -> list[ServerFacts]:
        info, save, fsync = self.exchange(FACT_COMMANDS, "read the configuration", deadline)
        return [_facts(self.location, info, save, fsync)]

    def nodes(self) -> list[Any]:
        return [None]

    def scan(
        self, node: Any, cursor: int, genesis_key: bytes, pattern: bytes, count: int
    ) -> tuple[Any, Any, list[Any]]:
        """One trip: the genesis, then one ``SCAN`` page, on one connection."""
        commands = _scan_commands(cursor, genesis_key, pattern, count)
        return _scan_replies(self.exchange(commands, "spent_ids"))

    def close(self) -> None:
        self.closed = True


class AsyncPoolIO:
    """Standalone, async: the same exchange as :class:`PoolIO`, awaited."""

    def __init__(self, pool: Any, location: str, budget: float | None = None) -> None:
        if getattr(pool, "cache", None) is not None:
            raise UnsafeStoreConfig("a pool with client-side caching could serve stale reads")
        self.budget = budget
        self._pool = pool
        self._errors = io_errors()
        self._response_error = _response_error()
        self._noscript = _noscript_error()
        self.location = location
        self.closed = False

    async def exchange(
        self, commands: Sequence[Command], what: str, deadline: float | None = None
    ) -> list[Any]:
        if self.closed:
            raise LedgerClosed("the ledger is closed")
        if _left(deadline) == 0.0:  # no new trip (nor a new connection) after the budget
            raise LedgerUnavailable(f"{what}: the operation's timeout ran out before sending")
        try:
            conn = await self._pool.get_connection()
        except self._errors as exc:
            raise driver_error(exc, what, sent=False) from exc
        if _left(deadline) == 0.0:
            await self._pool.release(conn)
            raise LedgerUnavailable(f"{what}: the operation's timeout ran out before sending")
        try:
            if len(commands) == 1:
                await conn.send_command(*commands[0])
            else:
                await conn.send_packed_command(conn.pack_commands(commands))
            replies: list[Any] = []
            for _ in commands:
                try:
                    replies.append(await conn.read_response(disable_decoding=True))
                except self._response_error as exc:
                    replies.append(exc)
            return replies
        except BaseException as exc:
            await conn.disconnect(nowait=True)  # failed or cancelled: never reuse it
            if isinstance(exc, self._errors):
                raise driver_error(exc, what, sent=True) from exc
            raise
        finally:
            await self._pool.release(conn)

    async def call(
        self, commands: Sequence[Command], what: str, deadline: float | None = None
    ) -> list[Any]:
        replies = await self.exchange(commands, what, deadline)
        if _noscript(commands, replies, self._noscript):
            replies = await self.exchange(as_eval(commands), what, deadline)
        return _first_error(replies, what)

    async def facts(self, deadline: float | None = None) -> list[ServerFacts]:
        info, save, fsync = await self.exchange(FACT_COMMANDS, "read the configuration", deadline)
        return [_facts(self.location, info, save, fsync)]

    def nodes(self) -> list[Any]:
        return [None]

    async def scan(
        self, node: Any, cursor: int, genesis_key: bytes, pattern: bytes, count: int
    ) -> tuple[Any, Any, list[Any]]:
        commands = _scan_commands(cursor, genesis_key, pattern, count)
        return _scan_replies(await self.exchange(commands, "spent_ids"))

    def close(self) -> None:
        self.closed = True


class ClusterIO:
    """Redis Cluster, sync: one command per trip through redis-py's Cluster client."""

    def __init__(self, cluster: Any, location: str) -> None:
        _check_cluster(cluster)
        self.budget: float | None = None
        self._cluster = cluster
        self._errors = io_errors()
        self._response_error = _response_error()
        self._noscript = _noscript_error()
        self.location = location
        self.closed = False

    def call(
        self, commands: Sequence[Command], what: str, deadline: float | None = None
    ) -> list[Any]:
        """``deadline`` is not applied: redis-py's Cluster client retries and redirects
        inside one call, bounded only by its socket timeouts (docs/redis.md)."""
        if self.closed:
            raise LedgerClosed("the ledger is closed")
        (command,) = commands  # no WAIT here: see rules.SpendPlan.build
        try:
            try:
                return [self._cluster.execute_command(*command, **_options(command))]
            except self._noscript:
                (command,) = as_eval(commands)  # NOSCRIPT: the script did not run
                return [self._cluster.execute_command(*command)]
        except self._errors as exc:
            raise driver_error(exc, what, sent=True) from exc

    def facts(self, deadline: float | None = None) -> list[ServerFacts]:
        try:
            primaries = self._cluster.get_primaries()
        except self._errors as exc:
            raise driver_error(exc, "read the configuration", sent=False) from exc
        out = []
        for node in primaries:
            replies = []
            for command in FACT_COMMANDS:
                try:
                    replies.append(self._cluster.execute_command(*command, target_nodes=node))
                except self._response_error as exc:
                    replies.append(exc)  # refused (NOPERM, renamed): judged as unknown
                except self._errors as exc:
                    # Not read at all (a lost node, no free connection): no verdict.
                    raise driver_error(exc, "read the configuration", sent=False) from exc
            out.append(_facts(f"node {node.name}", *replies))
        return out

    def nodes(self) -> list[Any]:
        """Every master: a namespace lives in one slot, but the slot may move mid-scan."""
        try:
            return list(self._cluster.get_primaries())
        except self._errors as exc:
            raise driver_error(exc, "spent_ids", sent=False) from exc

    def scan(
        self, node: Any, cursor: int, genesis_key: bytes, pattern: bytes, count: int
    ) -> tuple[Any, Any, list[Any]]:
        """Two commands: the genesis (routed by its slot), then one page of ``node``."""
        if self.closed:
            raise LedgerClosed("the ledger is closed")
        try:
            genesis = self._cluster.execute_command("GET", genesis_key)
            cursors, keys = self._cluster.execute_command(
                "SCAN", cursor, "MATCH", pattern, "COUNT", count, target_nodes=node
            )
        except self._errors as exc:
            raise driver_error(exc, "spent_ids", sent=True) from exc
        return genesis, _one_cursor(cursors), list(keys)

    def close(self) -> None:
        self.closed = True


class AsyncClusterIO:
    """Redis Cluster, async.

    redis-py's async Cluster client fails at once when a node's connections are all in
    use; a semaphore as wide as that limit makes many concurrent spends wait instead.
    """

    def __init__(self, cluster: Any, location: str) -> None:
        _check_cluster(cluster)
        self.budget: float | None = None
        self._cluster = cluster
        self._errors = io_errors()
        self._response_error = _response_error()
        self._noscript = _noscript_error()
        limit = cluster.get_connection_kwargs().get("max_connections") or 100
        self._slots = asyncio.Semaphore(int(limit))
        self.location = location
        self.closed = False

    async def call(
        self, commands: Sequence[Command], what: str, deadline: float | None = None
    ) -> list[Any]:
        if self.closed:
            raise LedgerClosed("the ledger is closed")
        (command,) = commands
        async with self._slots:
            try:
                try:
                    return [await self._cluster.execute_command(*command, **_options(command))]
                except self._noscript:
                    (command,) = as_eval(commands)  # NOSCRIPT: the script did not run
                    return [await self._cluster.execute_command(*command)]
            except self._errors as exc:
                raise driver_error(exc, what, sent=True) from exc

    async def facts(self, deadline: float | None = None) -> list[ServerFacts]:
        try:
            await self._cluster.initialize()
            primaries = self._cluster.get_primaries()
        except self._errors as exc:
            raise driver_error(exc, "read the configuration", sent=False) from exc
        out = []
        for node in primaries:
            replies = []
            for command in FACT_COMMANDS:
                try:
                    async with self._slots:  # a connection like any other command's
                        reply = await self._cluster.execute_command(*command, target_nodes=node)
                    replies.append(reply)
                except self._response_error as exc:
                    replies.append(exc)  # refused (NOPERM, renamed): judged as unknown
                except self._errors as exc:
                    # Not read at all (a lost node, no free connection): no verdict.
                    raise driver_error(exc, "read the configuration", sent=False) from exc
            out.append(_facts(f"node {node.name}", *replies))
        return out

    def nodes(self) -> list[Any]:
        return list(self._cluster.get_primaries())

    async def scan(
        self, node: Any, cursor: int, genesis_key: bytes, pattern: bytes, count: int
    ) -> tuple[Any, Any, list[Any]]:
        if self.closed:
            raise LedgerClosed("the ledger is closed")
        async with self._slots:
            try:
                genesis = await self._cluster.execute_command("GET", genesis_key)
                cursors, keys = await self._cluster.execute_command(
                    "SCAN", cursor, "MATCH", pattern, "COUNT", count, target_nodes=node
                )
            except self._errors as exc:
                raise driver_error(exc, "spent_ids", sent=True) from exc
        return genesis, _one_cursor(cursors), list(keys)

    def close(self) -> None:
        self.closed = True


def _scan_commands(cursor: int, genesis_key: bytes, pattern: bytes, count: int) -> list[Command]:
    return [("GET", genesis_key), ("SCAN", cursor, "MATCH", pattern, "COUNT", count)]


def _scan_replies(replies: list[Any]) -> tuple[Any, Any, list[Any]]:
    """Standalone replies (raw bytes) -> ``(genesis, cursor, keys)``; an error reply raises."""
    for reply in replies:
        if isinstance(reply, Exception):
            raise driver_error(reply, "spent_ids", sent=True) from reply
    genesis, (cursor, keys) = replies
    try:
        number: Any = int(cursor)
    except (TypeError, ValueError):
        number = cursor  # judged (and refused) by the listing
    return genesis, number, list(keys)


def _one_cursor(cursors: Any) -> Any:
    """redis-py's Cluster SCAN answers ``{node: cursor}``; one node was asked."""
    if isinstance(cursors, dict) and len(cursors) == 1:
        return next(iter(cursors.values()))
    return cursors


# INFO (role, version, maxmemory-policy, aof_enabled) and CONFIG GET (save,
# appendfsync): what decides durability and identity, at open and on every re-check.
FACT_COMMANDS: list[Command] = [
    ("INFO",),
    ("CONFIG", "GET", "save"),
    ("CONFIG", "GET", "appendfsync"),
]


def _left(deadline: float | None) -> float | None:
    """Seconds left before ``deadline`` (0.0 once it passed); ``None``: no deadline."""
    if deadline is None:
        return None
    return max(0.0, deadline - time.monotonic())


def _noscript(commands: Sequence[Command], replies: list[Any], error: type[Exception]) -> bool:
    """The server lost its script cache: resend as EVAL (the script did not run)."""
    return isinstance(replies[0], error) and commands[0][0] == "EVALSHA"


def _noscript_error() -> type[Exception]:
    from .driver import redis_module

    error: type[Exception] = redis_module().exceptions.NoScriptError
    return error


def _response_error() -> type[Exception]:
    from .driver import redis_module

    error: type[Exception] = redis_module().exceptions.ResponseError
    return error


def _facts(node: str, info: Any, save: Any, fsync: Any) -> ServerFacts:
    config_error = next((r for r in (save, fsync) if isinstance(r, BaseException)), None)
    config: list[Any] = []
    if config_error is None:
        config = [*_pairs(save), *_pairs(fsync)]
    return facts_from(
        node,
        None if isinstance(info, BaseException) else info,
        config,
        info_error=info if isinstance(info, BaseException) else None,
        config_error=config_error,
    )


def _pairs(reply: Any) -> list[Any]:
    if isinstance(reply, dict):
        return [x for item in reply.items() for x in item]
    return list(reply)


def _check_cluster(cluster: Any) -> None:
    """Refuse Cluster clients that could read a stale replica (C3) or decode tokens."""
    if getattr(cluster, "read_from_replicas", False) or getattr(
        cluster, "load_balancing_strategy", None
    ):
        raise UnsafeStoreConfig(
            "a Cluster client that reads from replicas can miss a fresh spend (C3): "
            "build it without read_from_replicas / load_balancing_strategy"
        )
    if cluster.get_encoder().decode_responses:
        raise UnsafeStoreConfig("a Cluster client with decode_responses=True cannot hold tokens")
