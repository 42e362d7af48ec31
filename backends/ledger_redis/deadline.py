"""The operation's deadline, enforced on every wait of it: connect, send, each read.

A socket timeout bounds one ``recv``; a server that trickles its reply a byte at a time
restarts it with every byte, and redis-py reads a reply (and a new connection's
handshake) in as many ``recv`` calls as it takes. So the deadline of the running
operation (:data:`DEADLINE`, set by ``transport.through``) bounds the waits themselves:
a sync ledger's connections wrap their socket so each ``recv``/``send`` may wait only
the time left (:func:`bound_sync`), and an async operation awaits each primitive
operation within the time left (:func:`within`). Context-local, so concurrent callers
(threads, tasks) each keep their own deadline and never wait on another's.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Awaitable
from contextvars import ContextVar
from typing import Any, TypeVar

T = TypeVar("T")

# When the running ledger operation must be over (time.monotonic()), or None.
DEADLINE: ContextVar[float | None] = ContextVar("ledger_redis_deadline", default=None)
SLACK = 0.99  # of the time left, as a socket timeout (see DeadlineSocket._arm)


def _left(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0.0:
        raise TimeoutError("the operation's timeout ran out")
    return left


class DeadlineSocket:
    """A socket whose every wait is cut to the running operation's time left (redis-py
    maps the ``socket.timeout`` to its ``TimeoutError``); all else is the socket's."""

    __slots__ = ("_applied", "_sock", "_timeout")

    def __init__(self, sock: Any) -> None:
        self._sock = sock
        self._timeout: float | None = sock.gettimeout()  # what redis-py asked for
        self._applied = self._timeout  # what the socket has

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)

    def settimeout(self, value: float | None) -> None:
        self._timeout = self._applied = value
        self._sock.settimeout(value)

    def gettimeout(self) -> float | None:
        return self._timeout

    def _arm(self) -> None:
        """No syscall while the timeout in place ends before the deadline: set a hair
        under the time left, the next operation's deadline (a moment later) keeps it."""
        deadline, base, applied = DEADLINE.get(), self._timeout, self._applied
        if deadline is None or base == 0:  # no operation's, or a non-blocking poll
            wanted = base
        else:
            left = _left(deadline)
            if applied and applied <= left and (base is None or applied <= base):
                return
            wanted = left * SLACK if base is None or base > left * SLACK else base
        if wanted != applied:
            self._sock.settimeout(wanted)
            self._applied = wanted

    def recv(self, *args: Any) -> Any:
        self._arm()
        return self._sock.recv(*args)

    def recv_into(self, *args: Any) -> Any:
        self._arm()
        return self._sock.recv_into(*args)

    def send(self, *args: Any) -> Any:
        self._arm()
        return self._sock.send(*args)

    def sendall(self, *args: Any) -> Any:
        self._arm()
        return self._sock.sendall(*args)


class _Bounded:
    """Mixed into a redis-py connection class: its TCP connect waits at most the time
    left, and its socket is a :class:`DeadlineSocket`."""

    socket_connect_timeout: float | None

    def _connect(self) -> Any:
        deadline, base = DEADLINE.get(), self.socket_connect_timeout
        if deadline is not None:
            left = _left(deadline)
            if base is None or left < base:
                self.socket_connect_timeout = left
        try:
            sock = super()._connect()  # type: ignore[misc]
        finally:
            self.socket_connect_timeout = base
        return DeadlineSocket(sock)


_CLASSES: dict[type, type] = {}


def _bounded(cls: type) -> type:
    if issubclass(cls, _Bounded):
        return cls
    if cls not in _CLASSES:
        _CLASSES[cls] = type(f"Bounded{cls.__name__}", (_Bounded, cls), {})
    return _CLASSES[cls]


def bound_sync(client: Any, *, cluster: bool) -> None:
    """Make the connections of a ledger's sync pool (or of every node of its Cluster
    client, present and future) :class:`_Bounded`; idle ones are closed to reconnect so
    (a host's busy ones keep theirs)."""
    if not cluster:
        _bound_pool(client)
        return
    manager = client.nodes_manager
    create = manager.create_redis_node
    if not getattr(create, "bounded", False):  # nodes the client finds later

        def create_bounded(*args: Any, **kwargs: Any) -> Any:
            node = create(*args, **kwargs)
            _bound_pool(node.connection_pool)
            return node

        create_bounded.bounded = True  # type: ignore[attr-defined]
        manager.create_redis_node = create_bounded
    for node in [*client.get_nodes(), *manager.startup_nodes.values()]:
        if node.redis_connection is not None:  # the startup nodes refresh the topology
            _bound_pool(node.redis_connection.connection_pool)


def _bound_pool(pool: Any) -> None:
    """New connections, and the pool's present ones, which reconnect with a bounded
    socket (redis-py keeps a connection object across reconnects)."""
    pool.connection_class = _bounded(pool.connection_class)
    for name in ("_available_connections", "_in_use_connections", "_connections"):
        for conn in getattr(pool, name, ()):
            conn.__class__ = _bounded(type(conn))
    pool.disconnect(inuse_connections=False)


async def within(awaitable: Awaitable[T]) -> T:
    """``awaitable`` cancelled when the running operation's deadline passes (a
    ``TimeoutError``, which the transport judges as any failure of that operation)."""
    deadline = DEADLINE.get()
    if deadline is None:
        return await awaitable
    left = deadline - time.monotonic()
    if sys.version_info >= (3, 11):
        async with asyncio.timeout(left):
            return await awaitable
    return await asyncio.wait_for(awaitable, left)
