"""The sync Redis ledger: :mod:`.decisions` driven with redis-py's sync objects.

A socket timeout bounds one ``recv`` (a reply trickled a byte at a time restarts it), so
the ledger's sockets cut each wait to the operation's time left (``DEADLINE``).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Generic, TypeVar

from ledger_core.base import ReentrantLedgerBase
from ledger_core.doctor import Check
from ledger_core.ids import DEFAULT_NAMESPACE, MarkerKind, validate_namespace, validate_request_id
from ledger_core.listing import pages
from ledger_core.steps import run_steps

from . import identity
from .commands import Borrow, Command, Exec, Op, Read, Release, Send
from .decisions import (
    DEADLINE,
    Listing,
    NamespaceScan,
    Operation,
    Scan,
    Session,
    Steps,
    Transport,
    open_steps,
    transport_for,
)
from .errors import redis_module
from .options import RedisOptions

SLACK = 0.99  # of the time left, as a socket timeout (see DeadlineSocket._arm)


def _left(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0.0:
        raise TimeoutError("the operation's timeout ran out")
    return left


def _waiting(name: str) -> Callable[..., Any]:

    def wait(self: Any, *args: Any) -> Any:
        self._arm()
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

    def _arm(self) -> None:
        """No syscall while the timeout in place ends before the deadline."""
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


def bound_sync(client: Any, *, cluster: bool) -> None:
    """Every connection of a pool (or Cluster client, nodes present and future)
    :class:`_Bounded`; idle ones reconnect so."""
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


def packed(conn: Any, commands: Sequence[Command]) -> Any:
    if len(commands) == 1:
        return conn.pack_command(*commands[0])
    return conn.pack_commands(commands)


class SyncDriver:
    def __init__(self, io: Transport) -> None:
        self.client = io.client
        if io.budget is not None:  # the ledger's own client
            bound_sync(self.client, cluster=io.cluster)

    def __call__(self, op: Op) -> Any:
        if isinstance(op, Read | Send):
            conn = op.conn
            try:
                if isinstance(op, Read):
                    return conn.read_response(disable_decoding=True)
                return conn.send_packed_command(packed(conn, op.commands))
            except Exception:
                raise
            except BaseException:
                # Interrupted: the steps never see it, so the connection is dropped here.
                conn.disconnect()
                self.client.release(conn)
                raise
        if isinstance(op, Exec):
            return self.client.execute_command(*op.command, **op.options)
        if isinstance(op, Release):
            if op.drop:
                op.conn.disconnect()
            return self.client.release(op.conn)
        if isinstance(op, Borrow):
            return self.client.get_connection()
        return self.client.get_primaries()


Listed = TypeVar("Listed")  # what a listing returns: an Iterator or an AsyncIterator


class Shell(Generic[Listed]):
    def __init__(self, session: Session, driver: Any, on_close: Callable[[], Any] | None) -> None:
        self._session, self._driver, self._on_close = session, driver, on_close
        self._info = session.opened.info

    def spent_ids(self, count: int = 1000) -> Listed:
        """Every id spent in this namespace, by ``SCAN`` pages of ``count``."""
        return self._scan(Listing(self._session.plan, count))

    def namespaces(self, count: int = 1000) -> Listed:
        """Every namespace with a genesis in this key space, each once."""
        return self._scan(NamespaceScan(self._session.plan.keys, count))

    def _lineage(self) -> Listed:
        return self._scan(Listing(self._session.plan, 1000, MarkerKind.LINEAGE))

    def _scan(self, scan: Scan) -> Listed:
        raise NotImplementedError

    def _spend_many(self, request_ids: Sequence[str]) -> Steps[list[bool]]:
        return self._session.spend_many([validate_request_id(r) for r in request_ids])

    def _is_spent_many(self, request_ids: Sequence[str]) -> Steps[list[bool]]:
        return self._session.is_spent_many([validate_request_id(r) for r in request_ids])

    def doctor_checks(self) -> list[Check]:
        opened = self._session.opened
        return identity.doctor_checks(
            opened.facts,
            opened.options,
            self._info,
            str(getattr(redis_module(), "__version__", "?")),
            opened.replication,
            sentinel=self._session.io.location.startswith("redis+sentinel:"),
        )

    def _close_transport(self) -> Callable[[], Any] | None:
        io = self._session.io
        if io.closed:
            return None
        io.close()
        return self._on_close


def preflight_checks(io: Transport, options: RedisOptions) -> list[Check]:
    """``decision-ledger doctor`` before ``setup``: the servers' settings, read as an
    open reads them (one trip per server); nothing is written."""

    def steps() -> Steps[list[identity.ServerFacts]]:
        with Operation(io, "read the configuration", spend=False):
            return (yield from io.facts())

    facts = run_steps(steps(), SyncDriver(io))
    driver = str(getattr(redis_module(), "__version__", "?"))
    return identity.settings_checks(facts, options, driver)


class RedisLedger(Shell[Iterator[str]], ReentrantLedgerBase):
    """A sync ledger in Redis: one genesis-proving script per spend or read (one round
    trip, ``WAIT`` included), never an expiry."""

    @classmethod
    def from_client(
        cls, client: Any, *, namespace: str = DEFAULT_NAMESPACE, **options: Any
    ) -> RedisLedger:
        """A ledger on a host's ``Redis``, ``ConnectionPool`` or ``RedisCluster`` (never closed)."""
        opts = RedisOptions.for_client(options)
        io = transport_for(client, asyncio_client=False)
        return cls.open_on(io, namespace=validate_namespace(namespace), options=opts)

    @classmethod
    def open_on(
        cls,
        io: Transport,
        *,
        namespace: str,
        options: RedisOptions,
        on_close: Callable[[], None] | None = None,
    ) -> RedisLedger:
        driver = SyncDriver(io)
        try:
            opened = run_steps(open_steps(io, namespace, options), driver)
        except BaseException:
            if on_close is not None:
                on_close()
            raise
        return cls(Session(io, opened), driver, on_close)

    def _spend(self, request_id: bytes, digest: bytes | None = None) -> bool:
        return run_steps(self._session.spend(request_id, digest), self._driver)

    _spend_as = _spend

    def _is_spent(self, request_id: bytes) -> bool:
        return run_steps(self._session.is_spent(request_id), self._driver)

    def spend_many(self, request_ids: Sequence[str]) -> list[bool]:
        """Pipelined, 1000 scripts per trip (one per trip on a Cluster)."""
        return run_steps(self._spend_many(request_ids), self._driver)

    def is_spent_many(self, request_ids: Sequence[str]) -> list[bool]:
        """Pipelined, 1000 read scripts per trip (one per trip on a Cluster)."""
        return run_steps(self._is_spent_many(request_ids), self._driver)

    def lineage(self) -> list[str]:
        return sorted(self._lineage())

    def reidentify(self) -> None:
        """A fresh genesis for this namespace, e.g. after a restore (``Reidentifiable``)."""
        run_steps(self._session.reidentify(), self._driver)

    def _scan(self, scan: Scan) -> Iterator[str]:
        return pages(lambda at: run_steps(self._session.page(at), self._driver), scan)

    def close(self) -> None:
        if (close := self._close_transport()) is not None:
            close()
