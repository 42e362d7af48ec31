"""How the decisions' requests reach Redis, written once as steps over a few primitive
operations; the sync and async flavours only perform those operations.

A decision yields a request (:data:`CALL` commands in one trip, the servers'
:data:`FACTS`, the :data:`NODES` to scan, one :data:`SCAN` page). :func:`through` serves
each with the transport's own steps, which yield primitive operations (:data:`Op`: borrow a
connection, send, read, ...), so what a failure *means* (sent or not, a lost reply, an
error reply) is decided here once; :class:`SyncOps` and :class:`AsyncOps` perform the
operations with redis-py's sync or asyncio objects, and ``ledger_core.steps`` drives it.

Standalone ledgers borrow one connection from a redis-py pool per exchange and speak on
it directly. That is what lets a failure be told apart precisely: a pool that cannot
hand out a connected connection has sent nothing (``LedgerUnavailable``), a failure after
sending is a lost reply (``ReplyLost``, which a spend resolves), and no layer in between
resends a command behind the ledger's back. Commands of one exchange share one trip (a
spend and its ``WAIT`` are pipelined).

Cluster ledgers go through redis-py's Cluster client, which follows ``MOVED``/``ASK``
and retries on its own; its spends therefore use ``SET NX GET``, which a resend cannot
fool. Every failure there counts as possibly sent.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from ledger_core.errors import InvalidLedgerURL, LedgerClosed, LedgerUnavailable, UnsafeStoreConfig

from .commands import FACT_COMMANDS, Command, as_eval, redis_options, scan_command
from .deadline import DEADLINE, bound_sync, within
from .driver import redis_module
from .errors import IO_ERRORS, driver_error, noscript_error, response_error
from .identity import ServerFacts, facts_from_replies

R = TypeVar("R")

# What a decision asks for (the first item of a request).
CALL = "call"  # (CALL, commands, what): one trip; each reply
FACTS = "facts"  # (FACTS, None, what): every master's ServerFacts
NODES = "nodes"  # (NODES, None, what): where to SCAN (every master of a Cluster)
SCAN = "scan"  # (SCAN, Page, what): (the proof's reply or None, cursor, keys)
Request = tuple[str, Any, str]

# What the transport asks of redis-py.
BORROW, SEND, READ, DROP, RELEASE = "borrow", "send", "read", "drop", "release"
EXEC, PRIMARIES = "exec", "primaries"


# One primitive operation: (kind, the borrowed connection it works on, its argument,
# redis-py keywords). Plain tuples: four of them per trip, on the hot path.
Op = tuple[str, Any, Any, Mapping[str, Any]]
NO_OPTIONS: Mapping[str, Any] = {}


OpSteps = Generator[Op, Any, Any]


@dataclass(frozen=True)
class Page:
    """One ``SCAN`` page of one node, and the identity proof sent after it when a
    listing must prove it (``proof``)."""

    node: Any
    cursor: int
    pattern: bytes
    count: int
    proof: Command | None = None


class Transport:
    """Where a ledger points and how its requests are served (standalone or Cluster).

    ``budget``: seconds one ledger operation may take in all (its re-check, its trips,
    a ``NOSCRIPT`` resend, the resolving retry, a Cluster client's own retries and
    redirects; every connect and read): no trip starts after it ran out, and every wait
    of a trip started in time is cut to the time left (:mod:`.deadline`). ``None`` for a
    host's client whose socket timeout is unbounded.
    """

    cluster = False

    def __init__(self, client: Any, location: str, budget: float | None = None) -> None:
        self.client = client
        self.location = location
        self.budget = budget
        self.closed = False
        self._response_error = response_error()
        self._noscript = noscript_error()

    def serve(self, request: Request, deadline: float | None) -> OpSteps:
        raise NotImplementedError

    def close(self) -> None:
        self.closed = True

    def _check_open(self) -> None:
        if self.closed:
            raise LedgerClosed("the ledger is closed")


class PoolTransport(Transport):
    """Standalone: one pooled connection per exchange (never the caller's retries).

    Reads never pass ``read_response(timeout=...)``: redis-py's asyncio connection
    answers ``None`` when that timeout expires, which a spend would read as "written
    now" (a double spend); the socket timeout raises instead.
    """

    def __init__(self, pool: Any, location: str, budget: float | None = None) -> None:
        if getattr(pool, "cache", None) is not None:
            raise UnsafeStoreConfig("a pool with client-side caching could serve stale reads")
        super().__init__(pool, location, budget)

    def serve(self, request: Request, deadline: float | None) -> OpSteps:
        kind, arg, what = request
        if kind == CALL:
            replies = yield from self._exchange(arg, what, deadline)
            if _noscript(arg, replies, self._noscript):
                replies = yield from self._exchange(as_eval(arg), what, deadline)
            return _first_error(replies, what)
        if kind == FACTS:
            replies = yield from self._exchange(FACT_COMMANDS, "read the configuration", deadline)
            return [facts_from_replies(self.location, *replies)]
        if kind == NODES:
            return [None]
        page: Page = arg
        commands = [scan_command(page.cursor, page.pattern, page.count)]
        if page.proof is not None:  # one trip: the page, then the proof
            commands.append(page.proof)
        replies = yield from self._exchange(commands, what, deadline)
        for reply in replies:
            if isinstance(reply, Exception):
                raise driver_error(reply, what, sent=True) from reply
        proved = replies[1] if page.proof is not None else None
        cursor, keys = replies[0]
        try:
            number: Any = int(cursor)
        except (TypeError, ValueError):
            number = cursor  # judged (and refused) by the listing
        return proved, number, list(keys)

    def _exchange(
        self, commands: Sequence[Command], what: str, deadline: float | None
    ) -> Generator[Op, Any, list[Any]]:
        """Send ``commands`` in one trip; each reply, or the server's error for it.

        No cleanup step is ever yielded from an ``except BaseException`` or a
        ``finally``: a cancelled operation is cleaned up by the ops themselves
        (:func:`_abandoned`), and this generator is simply dropped.
        """
        self._check_open()
        _in_time(what, deadline)  # no new trip (nor a new connection) after the budget
        try:
            conn = yield (BORROW, None, None, NO_OPTIONS)
        except IO_ERRORS as exc:
            raise driver_error(exc, what, sent=False) from exc
        try:
            _in_time(what, deadline)
        except LedgerUnavailable:
            yield (RELEASE, conn, None, NO_OPTIONS)
            raise
        try:
            yield (SEND, conn, commands, NO_OPTIONS)
            replies: list[Any] = []
            for _ in commands:
                try:
                    replies.append((yield (READ, conn, None, NO_OPTIONS)))
                except self._response_error as exc:
                    replies.append(exc)  # the connection stays in step: read the rest
        except IO_ERRORS as exc:
            yield (DROP, conn, None, NO_OPTIONS)  # failed mid-exchange: never reuse it
            raise driver_error(exc, what, sent=True) from exc
        yield (RELEASE, conn, None, NO_OPTIONS)
        return replies


class ClusterTransport(Transport):
    """Redis Cluster: one command per trip through redis-py's Cluster client."""

    cluster = True

    def __init__(self, cluster: Any, location: str, budget: float | None = None) -> None:
        if getattr(cluster, "read_from_replicas", False) or getattr(
            cluster, "load_balancing_strategy", None
        ):
            raise UnsafeStoreConfig(
                "a Cluster client that reads from replicas can miss a fresh spend (C3): "
                "build it without read_from_replicas / load_balancing_strategy"
            )
        if cluster.get_encoder().decode_responses:
            raise UnsafeStoreConfig(
                "a Cluster client with decode_responses=True cannot hold tokens"
            )
        super().__init__(cluster, location, budget)

    def serve(self, request: Request, deadline: float | None) -> OpSteps:
        kind, arg, what = request
        self._check_open()
        _in_time(what, deadline)  # no new call (nor a client's retry) after the budget
        if kind == CALL:
            (command,) = arg  # no WAIT here: see decisions.plan_for
            try:
                try:
                    return [(yield (EXEC, None, command, redis_options(command)))]
                except self._noscript:
                    (command,) = as_eval(arg)  # NOSCRIPT: the script did not run
                    return [(yield (EXEC, None, command, NO_OPTIONS))]
            except IO_ERRORS as exc:
                raise driver_error(exc, what, sent=True) from exc
        if kind == FACTS:
            return (yield from self._facts())
        if kind == NODES:
            return (yield from self._primaries(what))
        page: Page = arg
        try:
            cursors, keys = yield (
                EXEC,
                None,
                scan_command(page.cursor, page.pattern, page.count),
                {"target_nodes": page.node},
            )
            proved = None
            if page.proof is not None:  # routed by its slot, right after the page
                proved = yield (EXEC, None, page.proof, NO_OPTIONS)
        except IO_ERRORS as exc:
            raise driver_error(exc, what, sent=True) from exc
        # redis-py's Cluster SCAN answers {node: cursor}; one node was asked.
        if isinstance(cursors, dict) and len(cursors) == 1:
            cursors = next(iter(cursors.values()))
        return proved, cursors, list(keys)

    def _primaries(self, what: str) -> OpSteps:
        """Every master: a namespace lives in one slot, but the slot may move mid-scan."""
        try:
            return list((yield (PRIMARIES, None, None, NO_OPTIONS)))
        except IO_ERRORS as exc:
            raise driver_error(exc, what, sent=False) from exc

    def _facts(self) -> Generator[Op, Any, list[ServerFacts]]:
        what = "read the configuration"
        out = []
        for node in (yield from self._primaries(what)):
            replies = []
            for command in FACT_COMMANDS:
                try:
                    replies.append((yield (EXEC, None, command, {"target_nodes": node})))
                except self._response_error as exc:
                    replies.append(exc)  # refused (NOPERM, renamed): judged as unknown
                except IO_ERRORS as exc:
                    # Not read at all (a lost node, no free connection): no verdict.
                    raise driver_error(exc, what, sent=False) from exc
            out.append(facts_from_replies(f"node {node.name}", *replies))
        return out


def through(
    transport: Transport, steps: Generator[Request, Any, R], deadline: float | None
) -> Generator[Op, Any, R]:
    """``steps`` (a decision) with each of its requests served by ``transport``: one
    generator of primitive operations, for ``ledger_core.steps`` to drive. A request's
    failure (a ``LedgerError`` by then) is thrown into the decision, which may retry."""
    DEADLINE.set(deadline)  # this operation's, for every wait of it (.deadline)
    answer: Any = None
    failure: Exception | None = None
    try:
        while True:
            try:
                request = steps.send(answer) if failure is None else steps.throw(failure)
            except StopIteration as done:
                result: R = done.value
                return result
            try:
                answer, failure = (yield from transport.serve(request, deadline)), None
            except Exception as exc:
                answer, failure = None, exc
    finally:
        DEADLINE.set(None)  # a host's own commands on its client are never cut short


def _abandoned(kind: str, exc: BaseException) -> bool:
    """Whether an operation on a borrowed connection was interrupted by something that
    is no ``Exception`` (cancellation, ``KeyboardInterrupt``): the steps never see it,
    so the operation drops the connection itself, as the steps would have."""
    return not isinstance(exc, Exception) and kind in (SEND, READ)


class SyncOps:
    """The primitive operations on redis-py's sync pool or Cluster client."""

    def __init__(self, transport: Transport) -> None:
        self.client = transport.client
        if transport.budget is not None:  # the ledger's own client
            bound_sync(self.client, cluster=transport.cluster)

    def __call__(self, op: Op) -> Any:
        kind, conn, arg, options = op
        try:
            if kind == READ:
                return conn.read_response(disable_decoding=True)
            if kind == SEND:
                return conn.send_packed_command(_packed(conn, arg))
            if kind == EXEC:
                return self.client.execute_command(*arg, **options)
            if kind == BORROW:
                return self.client.get_connection()
            if kind == PRIMARIES:
                return self.client.get_primaries()
        except BaseException as exc:
            if _abandoned(kind, exc):
                conn.disconnect()
                self.client.release(conn)
            raise
        if kind == DROP:
            conn.disconnect()
        return self.client.release(conn)


class AsyncOps:
    """The primitive operations on redis-py's asyncio pool or Cluster client.

    redis-py's async Cluster client fails at once when a node's connections are all in
    use; a semaphore as wide as that limit makes many concurrent commands wait instead.
    """

    def __init__(self, transport: Transport) -> None:
        self.client = transport.client
        limit = 0
        if transport.cluster:
            limit = int(self.client.get_connection_kwargs().get("max_connections") or 100)
        self._slots = asyncio.Semaphore(limit or 1)

    def __call__(self, op: Op) -> Awaitable[Any]:
        return self._perform(op)

    async def _perform(self, op: Op) -> Any:
        # Every wait on the server is bounded *inside* the try: the operation's own deadline
        # then arrives as a TimeoutError, which the steps see and answer (a DROP), while a
        # cancellation from outside is a BaseException the steps never see, cleaned up here.
        # Bounding the whole call instead released a connection twice (a KeyError).
        kind, conn, arg, options = op
        try:
            if kind == READ:
                return await within(conn.read_response(disable_decoding=True))
            if kind == SEND:
                return await within(conn.send_packed_command(_packed(conn, arg)))
            if kind == EXEC:
                return await within(self._execute(arg, options))
            if kind == BORROW:
                return await within(self.client.get_connection())
            if kind == PRIMARIES:
                await within(self.client.initialize())
                return self.client.get_primaries()
        except BaseException as exc:
            if _abandoned(kind, exc):
                await conn.disconnect(nowait=True)  # cancelled mid-exchange: never reuse
                await self.client.release(conn)
            raise
        if kind == DROP:
            await conn.disconnect(nowait=True)
        return await self.client.release(conn)

    async def _execute(self, arg: Any, options: Mapping[str, Any]) -> Any:
        async with self._slots:  # a connection like any other command's
            return await self.client.execute_command(*arg, **options)


def _packed(conn: Any, commands: Sequence[Command]) -> Any:
    """One command packed alone (redis-py's cheaper path), several in one buffer."""
    if len(commands) == 1:
        return conn.pack_command(*commands[0])
    return conn.pack_commands(commands)


def deadline_for(transport: Transport) -> float | None:
    """When the whole operation must be over (its re-check and retries included)."""
    return None if transport.budget is None else time.monotonic() + transport.budget


def _in_time(what: str, deadline: float | None) -> None:
    if deadline is not None and deadline - time.monotonic() <= 0.0:
        raise LedgerUnavailable(f"{what}: the operation's timeout ran out before sending")


def _noscript(commands: Sequence[Command], replies: list[Any], error: type[Exception]) -> bool:
    """The server lost its script cache: resend as EVAL (the script did not run)."""
    return isinstance(replies[0], error) and commands[0][0] == "EVALSHA"


def _first_error(replies: list[Any], what: str) -> list[Any]:
    """Raise the first command's error reply; later replies are the decisions' to judge
    (a ``WAIT`` that fails after the write landed is not a plain refusal)."""
    first = replies[0]
    if isinstance(first, Exception):
        raise driver_error(first, what, sent=True) from first
    return replies


def transport_for(client: Any, *, asyncio_client: bool) -> Transport:
    """The transport over a host's redis-py client, pool or Cluster client (sync or
    asyncio, as the ledger is); the ledger never closes it."""
    redis = redis_module()
    if asyncio_client:
        cluster_type, client_type = redis.asyncio.cluster.RedisCluster, redis.asyncio.Redis
        pool_type, flavour = redis.asyncio.ConnectionPool, "redis.asyncio"
    else:
        cluster_type, client_type = redis.cluster.RedisCluster, redis.Redis
        pool_type, flavour = redis.ConnectionPool, "redis-py"
    if isinstance(client, cluster_type):
        nodes = client.get_nodes()
        where = f"redis+cluster://{nodes[0].name}" if nodes else ""
        return ClusterTransport(client, where, _budget(client.get_connection_kwargs()))
    if isinstance(client, client_type):
        pool = client.connection_pool
        return PoolTransport(pool, _describe_client(client), _budget(pool.connection_kwargs))
    if isinstance(client, pool_type):
        return PoolTransport(client, _describe_client(client), _budget(client.connection_kwargs))
    raise InvalidLedgerURL(
        f"expected a {flavour} Redis, ConnectionPool or RedisCluster, not {type(client).__name__}"
    )


def _budget(kwargs: Mapping[str, Any]) -> float | None:
    """A host's client: its socket timeout bounds each ledger operation as a whole."""
    seconds = kwargs.get("socket_timeout")
    return float(seconds) if isinstance(seconds, int | float) and seconds > 0 else None


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
