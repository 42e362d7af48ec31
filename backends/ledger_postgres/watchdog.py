"""Per-operation deadlines: a black-holed network ends in a raise, not a hang.

Each operation arms a deadline on its socket; one still armed when due shuts the socket
down, and the blocked call raises. One timer (a thread, or a loop callback) wakes only
when the earliest is due, or every half timeout: a wake-up per operation would cost more
than the operation.

psycopg's public ways cannot keep a deadline on a black-holed network:
``asyncio.timeout(0.5)`` raised after 10.5 s (psycopg waits for a cancel request that
never arrives), and ``Connection.cancel_safe`` left the sync call blocked
(``test_a_stopped_server_raises_within_the_timeout`` fails without this module).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import socket
import threading
import time


class DeadlineQueue:
    """The armed deadlines, keyed by ticket and removed when their operation ends: a
    queued object per operation survived into the GC's older generations and slowed
    every collection. Not locked (the callers serialize). ``idle``: the timer's wait
    when nothing is armed, no longer than a first attempt's deadline."""

    def __init__(self, idle: float) -> None:
        self.idle = idle
        self._tickets = itertools.count()
        self._armed: dict[int, tuple[int, float]] = {}  # ticket -> (socket, due time)
        self._expired: set[int] = set()  # tickets whose socket was shut mid-operation

    def arm(self, fileno: int, due: float) -> int:
        ticket = next(self._tickets)
        self._armed[ticket] = (fileno, due)
        return ticket

    def finish(self, ticket: int) -> bool:
        """The operation is over; ``True`` if its deadline had already ended it."""
        if self._armed.pop(ticket, None) is not None:
            return False
        self._expired.discard(ticket)
        return True

    def expire_due(self) -> float | None:
        """Shut the sockets past their deadline; seconds to the next (``None``: none)."""
        now = time.monotonic()
        next_due: float | None = None
        for ticket, (fileno, when) in list(self._armed.items()):
            if when <= now:
                del self._armed[ticket]
                self._expired.add(ticket)
                shutdown_socket(fileno)
            elif next_due is None or when < next_due:
                next_due = when
        return None if next_due is None else next_due - now


class Watchdog:
    def __init__(self, idle: float, name: str = "ledger-postgres-deadlines") -> None:
        self._deadlines = DeadlineQueue(idle)
        self._name = name
        # arm/disarm take the bare lock, skipping the condition's Python-level enter/exit.
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._thread: threading.Thread | None = None
        self._stopped = False
        self._wake_at = float("inf")  # when the thread's current wait ends

    def arm(self, fileno: int, due: float) -> int:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
            elif due < self._wake_at:
                self._cond.notify()  # sooner than the thread's wait ends: wake it up
            return self._deadlines.arm(fileno, due)

    def disarm(self, deadline: int) -> bool:
        """Finish the operation; ``True`` if its deadline had already ended it."""
        with self._lock:
            return self._deadlines.finish(deadline)

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify()

    def _run(self) -> None:
        with self._cond:
            while not self._stopped:
                # Under the lock: no connection changes hands while its socket is shut.
                left = self._deadlines.expire_due()
                wait = self._deadlines.idle if left is None else left
                self._wake_at = time.monotonic() + wait
                self._cond.wait(wait)


class LoopWatchdog:
    def __init__(self, idle: float) -> None:
        self._deadlines = DeadlineQueue(idle)
        self._timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def arm(self, fileno: int, due: float) -> int:
        deadline = self._deadlines.arm(fileno, due)
        loop = asyncio.get_running_loop()
        at = loop.time() + (due - time.monotonic())  # the loop's clock may be its own
        if self._timer is None or self._loop is not loop or at < self._timer.when():
            if self._timer is not None:
                self._timer.cancel()
            self._loop = loop
            self._timer = loop.call_at(at, self._tick)
        return deadline

    def disarm(self, deadline: int) -> bool:
        return self._deadlines.finish(deadline)

    def _tick(self) -> None:
        self._timer = None
        left = self._deadlines.expire_due()
        if left is not None and self._loop is not None and not self._loop.is_closed():
            self._timer = self._loop.call_later(left, self._tick)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


def shutdown_socket(fileno: int) -> None:
    """End a socket from outside the call blocked on it (which wakes and raises)."""
    try:
        dup = os.dup(fileno)
    except OSError:
        return
    with socket.socket(fileno=dup) as sock, contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
