"""A new connection within a deadline, for the sync flavour (the async one has
``asyncio.wait_for``): libpq's ``connect_timeout`` has a 2 s floor and counts per host."""

from __future__ import annotations

import threading
from concurrent import futures
from typing import Any

import psycopg

from . import errors

Conn = psycopg.Connection[Any]


def connect_within(conninfo: str, seconds: float) -> Any:
    """A new autocommit ``psycopg.Connection``, or :class:`errors.OutOfTime` after ``seconds``; a
    helper thread connects, and closes a connection that arrives too late."""
    arrived: futures.Future[Conn] = futures.Future()

    def attempt() -> None:
        try:
            arrived.set_result(psycopg.connect(conninfo, autocommit=True))
        except BaseException as exc:  # handed to the caller, which maps it
            arrived.set_exception(exc)

    threading.Thread(target=attempt, name="ledger-postgres-connect", daemon=True).start()
    try:
        return arrived.result(max(0.0, seconds))
    except futures.TimeoutError:
        arrived.add_done_callback(_close_late)  # at once if it has just arrived
    raise errors.OutOfTime(f"no connection within the call's timeout ({seconds:.2f} s left)")


def _close_late(arrived: futures.Future[Conn]) -> None:
    if arrived.exception() is None:
        arrived.result().close()
