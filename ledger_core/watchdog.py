"""Socket deadlines: a black-holed or trickling network ends in a raise, not a hang.

An operation arms its socket with a due time and disarms it when it ends; one still armed
when due is shut down, and the call blocked on it wakes and raises. One timer (a thread,
or a loop callback) wakes only when the earliest is due, or every ``idle`` seconds: a
wake-up per operation would cost more than the operation. PostgreSQL arms the socket of
each statement (psycopg's cancel never arrives on a black-holed network); DynamoDB's sync
client arms each request's (botocore's ``read_timeout`` bounds a read, not a reply).

Cost per operation: one lock, a ticket and a dict entry to arm; one lock and a pop to
disarm (no object per operation: queued ones survived into the GC's older generations
and slowed every collection).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import socket
import threading
import time

Target = socket.socket | int  # a socket, or a file descriptor the caller owns


class Deadlines:
    """The armed deadlines, keyed by ticket and removed when their operation ends. Not
    locked (a subclass serializes)."""

    def __init__(self, idle: float) -> None:
        self.idle = idle  # the timer's wait when nothing is armed
        self._tickets = itertools.count()
        self._armed: dict[int, tuple[Target, float]] = {}  # ticket -> (socket, due time)
        self._expired: set[int] = set()  # tickets whose socket was shut mid-operation

    def disarm(self, ticket: int) -> bool:
        """The operation is over; ``True`` if its deadline had already ended it."""
        if self._armed.pop(ticket, None) is not None:
            return False
        self._expired.discard(ticket)
        return True

    def _expire_due(self) -> float | None:
        """Shut the sockets past their deadline; seconds to the next (``None``: none)."""
        now = time.monotonic()
        next_due: float | None = None
        for ticket, (target, when) in list(self._armed.items()):
            if when <= now:
                del self._armed[ticket]
                self._expired.add(ticket)
                shutdown(target)
            elif next_due is None or when < next_due:
                next_due = when
        return None if next_due is None else next_due - now


class Watchdog(Deadlines):
    """A thread shuts the sockets past their time. A forked child must not use its
    parent's (the thread is not there, the lock may be held): build another."""

    def __init__(self, idle: float) -> None:
        super().__init__(idle)
        # arm/disarm take the bare lock, skipping the condition's Python-level enter/exit.
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._thread: threading.Thread | None = None
        self._stopped = False
        self._wake_at = float("inf")  # when the thread's current wait ends

    def arm(self, target: Target, due: float) -> int:
        """Shut ``target`` at ``due`` (monotonic time) unless disarmed first: a ticket."""
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="ledger-deadlines", daemon=True
                )
                self._thread.start()
            elif due < self._wake_at:
                self._cond.notify()  # sooner than the thread's wait ends: wake it up
            ticket = next(self._tickets)
            self._armed[ticket] = (target, due)
            return ticket

    def disarm(self, ticket: int) -> bool:
        """The operation is over; ``True`` if its deadline had already ended it."""
        with self._lock:
            return super().disarm(ticket)

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify()

    def _run(self) -> None:
        with self._cond:
            while not self._stopped:
                # Under the lock: no connection changes hands while its socket is shut.
                left = self._expire_due()
                wait = self.idle if left is None else left
                self._wake_at = time.monotonic() + wait
                self._cond.wait(wait)


class LoopWatchdog(Deadlines):
    """A loop callback shuts the sockets past their time (one loop at a time: the
    callers' own)."""

    def __init__(self, idle: float) -> None:
        super().__init__(idle)
        self._timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def arm(self, target: Target, due: float) -> int:
        """Shut ``target`` at ``due`` (monotonic time) unless disarmed first: a ticket."""
        ticket = next(self._tickets)
        self._armed[ticket] = (target, due)
        loop = asyncio.get_running_loop()
        at = loop.time() + (due - time.monotonic())  # the loop's clock may be its own
        if self._timer is None or self._loop is not loop or at < self._timer.when():
            if self._timer is not None:
                self._timer.cancel()
            self._loop = loop
            self._timer = loop.call_at(at, self._tick)
        return ticket

    def _tick(self) -> None:
        self._timer = None
        left = self._expire_due()
        if left is not None and self._loop is not None and not self._loop.is_closed():
            self._timer = self._loop.call_later(left, self._tick)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


def shutdown(target: Target) -> None:
    """End a socket from outside the call blocked on it (which wakes and raises). A file
    descriptor is shut through a duplicate: the caller's socket object stays its own."""
    if isinstance(target, socket.socket):
        with contextlib.suppress(OSError):
            target.shutdown(socket.SHUT_RDWR)
        return
    try:
        dup = os.dup(target)
    except OSError:
        return
    with socket.socket(fileno=dup) as sock, contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


# One per process for callers without a ledger of their own to hold it (DynamoDB's
# connection classes): read it as ``watchdog.shared`` each time, a forked child's is new.
shared = Watchdog(1.0)


def _forked() -> None:
    global shared
    shared = Watchdog(1.0)


os.register_at_fork(after_in_child=_forked)
