"""Sync deadlines: one bound for all of an operation's waits on redis-py's sync sockets.

A socket timeout bounds one ``recv`` (a reply trickled a byte at a time restarts it), so
the ledger's own sockets cut each wait, and each connect, to the operation's time left
(``DEADLINE``, set around a trip by :class:`Bound`). The async flavour needs none of
this: asyncio cancels an operation's awaits at its deadline.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from contextvars import ContextVar
from types import TracebackType
from typing import Any, NamedTuple

# When the running trip must be over (time.monotonic()); context-local.
DEADLINE: ContextVar[float | None] = ContextVar("ledger_redis_deadline", default=None)


class Bound(NamedTuple):
    """``with Bound(deadline)``: the trip inside keeps ``deadline``; a host's own
    commands on its client, after it, are never cut short."""

    deadline: float | None

    def __enter__(self) -> None:
        DEADLINE.set(self.deadline)

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        DEADLINE.set(None)


SLACK = 0.99  # of the time left, as a socket timeout (see _waiting)


def _left(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0.0:
        raise TimeoutError("the operation's timeout ran out")
    return left


def _waiting(name: str) -> Callable[..., Any]:
    """The socket's ``name`` (a blocking call), its timeout first cut to the deadline's
    time left; no syscall while the timeout in place ends before the deadline."""

    def wait(self: DeadlineSocket, *args: Any) -> Any:
        deadline, base, applied = DEADLINE.get(), self._timeout, self._applied
        if deadline is None or base == 0:  # no operation's, or a non-blocking poll
            wanted = base
        else:
            left = deadline - time.monotonic()
            if left <= 0.0:
                raise TimeoutError("the operation's timeout ran out")
            if applied and applied <= left and (base is None or applied <= base):
                return getattr(self._sock, name)(*args)
            wanted = left * SLACK if base is None or base > left * SLACK else base
        if wanted != applied:
            self._sock.settimeout(wanted)
            self._applied = wanted
        return getattr(self._sock, name)(*args)

    return wait


class DeadlineSocket:
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

    recv, recv_into = _waiting("recv"), _waiting("recv_into")
    send, sendall = _waiting("send"), _waiting("sendall")


class _Bounded:
    """Mixed into a redis-py connection class: connect and socket bounded by the deadline."""

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


@functools.cache
def _bounded(cls: type) -> type:
    if issubclass(cls, _Bounded):
        return cls
    return type(f"Bounded{cls.__name__}", (_Bounded, cls), {})


def bound_sync(client: Any, budget: float | None, *, cluster: bool) -> None:
    """Every connection of a pool (or Cluster client, nodes present and future)
    :class:`_Bounded`; idle ones reconnect so. No ``budget``: no deadline to keep."""
    if budget is None:
        return
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
    pool.connection_class = _bounded(pool.connection_class)
    for name in ("_available_connections", "_in_use_connections", "_connections"):
        for conn in getattr(pool, name, ()):
            conn.__class__ = _bounded(conn.__class__)
    pool.disconnect(inuse_connections=False)
