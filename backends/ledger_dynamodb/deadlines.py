"""Whole-attempt deadlines for the sync client: a slow reply ends in a raise, not a hang.

botocore's ``read_timeout`` bounds each socket read, not a reply (a byte every 0.25 s
keeps a call alive for ever). So a request runs under :func:`bounded`: connection classes
installed on the ledger's own client arm its due time on the socket, and one watchdog
thread per process shuts the socket when it passes (botocore then raises). The async
ledger needs none of this: ``asyncio.wait_for`` cancels its request.
"""

from __future__ import annotations

import contextlib
import functools
import math
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

from ledger_core.forks import PerProcess

IDLE = 1.0  # seconds the watchdog sleeps when nothing is armed (arming wakes it)


class Watchdog:
    """Armed sockets and their due times; a thread shuts each one that passes its time.
    Renewed in a forked child (no parent's lock, no thread that does not exist there)."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._armed: dict[int, tuple[socket.socket, float]] = {}
        self._next = math.inf  # when the thread wakes next
        self._thread: threading.Thread | None = None
        self._tickets = 0

    def arm(self, sock: socket.socket, due: float) -> int:
        with self._lock:
            self._tickets += 1
            self._armed[self._tickets] = (sock, due)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="ledger-dynamodb-deadlines", daemon=True
                )
                self._thread.start()
            if due < self._next:
                self._lock.notify()
            return self._tickets

    def disarm(self, tickets: list[int]) -> None:
        with self._lock:
            for ticket in tickets:
                self._armed.pop(ticket, None)

    def _run(self) -> None:
        with self._lock:
            while True:
                now = time.monotonic()
                for ticket, (sock, due) in list(self._armed.items()):
                    if due <= now:
                        del self._armed[ticket]
                        with contextlib.suppress(OSError):
                            sock.shutdown(socket.SHUT_RDWR)
                self._next = min((due for _, due in self._armed.values()), default=now + IDLE)
                self._lock.wait(max(self._next - now, 0.001))


_WATCHDOG = PerProcess(Watchdog(), Watchdog)
_local = threading.local()


@contextlib.contextmanager
def bounded(due: float, share: float) -> Iterator[None]:
    """A request sent by this thread inside the block ends by ``due`` (monotonic time)
    and at most ``share`` seconds after it is sent."""
    _local.due, _local.share, _local.tickets = due, share, []
    try:
        yield
    finally:
        tickets, _local.due = _local.tickets, None
        if tickets:
            _WATCHDOG.get().disarm(tickets)


def _arm(conn: Any) -> None:
    due = getattr(_local, "due", None)
    sock = getattr(conn, "sock", None)
    if due is None or not isinstance(sock, socket.socket):
        return
    due = min(due, time.monotonic() + _local.share)
    if due != math.inf:
        _local.tickets.append(_WATCHDOG.get().arm(sock, due))


class _Armed:
    """Mixed into botocore's connection classes: each request arms its socket."""

    def connect(self) -> None:
        super().connect()  # type: ignore[misc]
        _arm(self)

    def request(self, *args: Any, **kwargs: Any) -> Any:
        if getattr(self, "sock", None) is not None:  # a kept-alive connection
            _arm(self)
        return super().request(*args, **kwargs)  # type: ignore[misc]


def install(client: Any) -> Any:
    """Arm the requests of ``client`` (one the ledger built) with their due times.

    No public botocore API reaches a request's socket, so this swaps the pool classes
    (urllib3's extension point) on the client's private HTTP session; a botocore
    without them keeps only its per-read timeouts (``docs/dynamodb.md``)."""
    session = getattr(getattr(client, "_endpoint", None), "http_session", None)
    manager = getattr(session, "_manager", None)
    if session is None or manager is None or not hasattr(manager, "pool_classes_by_scheme"):
        return client
    manager.pool_classes_by_scheme = _pools()
    session._pool_classes_by_scheme = _pools()  # proxy managers are made from these
    return client


@functools.cache
def _pools() -> dict[str, type]:
    from botocore import awsrequest

    def armed(pool: type, conn: type) -> type:
        cls = type(f"Armed{conn.__name__}", (_Armed, conn), {})
        return type(f"Armed{pool.__name__}", (pool,), {"ConnectionCls": cls})

    return {
        "http": armed(awsrequest.AWSHTTPConnectionPool, awsrequest.AWSHTTPConnection),
        "https": armed(awsrequest.AWSHTTPSConnectionPool, awsrequest.AWSHTTPSConnection),
    }
