"""Whole-attempt deadlines for the sync client: a slow reply ends in a raise, not a hang.

botocore's ``read_timeout`` bounds each socket read, not a reply (a byte every 0.25 s
keeps a call alive for ever). So a request runs under :func:`bounded`: connection classes
installed on the ledger's own client arm its due time on the socket, and one watchdog
thread per process shuts the socket when it passes (botocore then raises). The async
ledger needs none of this: asyncio cancels its request at the due time.

Cost per request: a thread-local write, and one lock taken to arm and one to disarm.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

IDLE = 1.0  # seconds the watchdog sleeps when nothing is armed (arming wakes it)


class Watchdog:
    """Armed sockets and their due times; a thread shuts each one that passes its time.
    A forked child gets a new one (no parent's lock, no thread that does not exist there)."""

    def __init__(self) -> None:
        self.lock = threading.Condition()
        self.armed: dict[int, tuple[socket.socket, float]] = {}
        self.next = math.inf  # when the thread wakes next
        self.thread: threading.Thread | None = None
        self.tickets = 0

    def start(self) -> None:
        self.thread = threading.Thread(
            target=self._run, name="ledger-dynamodb-deadlines", daemon=True
        )
        self.thread.start()

    def _run(self) -> None:
        with self.lock:
            while True:
                now = time.monotonic()
                for ticket, (sock, due) in list(self.armed.items()):
                    if due <= now:
                        del self.armed[ticket]
                        with contextlib.suppress(OSError):
                            sock.shutdown(socket.SHUT_RDWR)
                self.next = min((due for _, due in self.armed.values()), default=now + IDLE)
                self.lock.wait(max(self.next - now, 0.001))


_watchdog = Watchdog()
_local = threading.local()


def _forked() -> None:
    global _watchdog
    _watchdog = Watchdog()


os.register_at_fork(after_in_child=_forked)


@contextlib.contextmanager
def bounded(due: float) -> Iterator[None]:
    """A request sent by this thread inside the block ends by ``due`` (monotonic time)."""
    _local.due, _local.tickets = due, []
    try:
        yield
    finally:
        tickets, _local.due = _local.tickets, None
        if tickets:
            dog = _watchdog
            with dog.lock:
                for ticket in tickets:
                    dog.armed.pop(ticket, None)


class _Armed:
    """Mixed into botocore's connection classes: each request arms its socket."""

    def request(self, *args: Any, **kwargs: Any) -> Any:
        due = getattr(_local, "due", None)
        if due is not None:
            if getattr(self, "sock", None) is None:  # a new connection: made here, to arm it
                self.connect()  # type: ignore[attr-defined]
            sock = getattr(self, "sock", None)
            if isinstance(sock, socket.socket):
                dog = _watchdog
                with dog.lock:
                    dog.tickets += 1
                    dog.armed[dog.tickets] = (sock, due)
                    _local.tickets.append(dog.tickets)
                    if dog.thread is None:
                        dog.start()
                    if due < dog.next:
                        dog.lock.notify()
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
