"""Whole-attempt deadlines for the sync client: a slow reply ends in a raise, not a hang.

botocore's ``read_timeout`` bounds each socket read, not a reply (a byte every 0.25 s
keeps a call alive for ever). So a request runs under :func:`bounded`: connection classes
installed on the ledger's own client arm its due time on the socket, and the process's
watchdog (:mod:`ledger_core.watchdog`) shuts the socket when it passes (botocore then
raises). The async ledger needs none of this: asyncio cancels its request at the due time.

Cost per request: a thread-local write, and one lock taken to arm and one to disarm.
"""

from __future__ import annotations

import contextlib
import functools
import socket
import threading
from collections.abc import Iterator
from typing import Any

from ledger_core import watchdog

_local = threading.local()


@contextlib.contextmanager
def bounded(due: float) -> Iterator[None]:
    """A request sent by this thread inside the block ends by ``due`` (monotonic time)."""
    _local.due, _local.tickets = due, []
    try:
        yield
    finally:
        tickets, _local.due = _local.tickets, None
        for ticket in tickets:
            watchdog.shared.disarm(ticket)


class _Armed:
    """Mixed into botocore's connection classes: each request arms its socket."""

    def request(self, *args: Any, **kwargs: Any) -> Any:
        due = getattr(_local, "due", None)
        if due is not None:
            if getattr(self, "sock", None) is None:  # a new connection: made here, to arm it
                self.connect()  # type: ignore[attr-defined]
            sock = getattr(self, "sock", None)
            if isinstance(sock, socket.socket):
                _local.tickets.append(watchdog.shared.arm(sock, due))
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
