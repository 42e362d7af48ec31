"""Per-operation deadlines: a black-holed network ends in a raise, not a hang.

psycopg's calls take no timeout, and a network that accepts packets and answers none
would block them forever. Each operation arms a deadline on its connection's socket;
if it is still armed when time is up, the socket is shut down and the blocked call
raises. Each operation's deadline is the part of its call's one timeout it may use
(a call's settle or re-read gets what the first attempt left), and the one timer (a
thread for the sync ledger, a loop callback for the async one) only wakes when the
earliest armed one is due, or every half timeout when idle. A wake-up per operation
would cost more than the operation's client-side work.

psycopg's public ways to end a call cannot keep a deadline on a black-holed network:
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
    """The armed deadlines, and the one rule for expiring them.

    An armed deadline is an entry keyed by a ticket (a counter), removed when its
    operation finishes: nothing armed outlives its operation. A per-operation object
    kept queued for a whole timeout (thousands of them under load) survived into the
    garbage collector's older generations and made its collections slower, which cost
    more than the rest of a deadline's work. Expiry scans the armed entries (one per
    operation in flight, so at most the pool's size plus a fresh connection or two)
    once per wake-up, and wake-ups come about once per half timeout.

    Not locked: the thread watchdog calls it under its lock, the loop watchdog from
    its event loop only. ``idle``: how long the timer waits when nothing is armed. It
    must be no longer than the shortest deadline a first attempt arms, so arming one
    never has to wake the timer early (a wake-up per operation costs a context switch).
    """

    def __init__(self, idle: float) -> None:
        self.idle = idle
        self._tickets = itertools.count()
        self._armed: dict[int, tuple[int, float]] = {}  # ticket -> (socket, due time)
        self._expired: set[int] = set()  # tickets whose socket was shut mid-operation

    def arm(self, fileno: int, due: float) -> int:
        """Arm a deadline at ``due`` (``time.monotonic()`` time) on ``fileno``."""
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
        """Shut the sockets of operations past their deadline; seconds until the next
        deadline, or ``None`` when nothing is armed."""
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
    """For the sync ledger: one daemon thread, started on first use."""

    def __init__(self, idle: float, name: str = "ledger-postgres-deadlines") -> None:
        self._deadlines = DeadlineQueue(idle)
        self._name = name
        # arm/disarm take the bare lock: the same lock as the condition's, without the
        # condition's Python-level __enter__/__exit__ on every operation.
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
                # Under the lock: an operation cannot finish and hand its connection to
                # someone else while its socket is being shut down. Anything armed
                # during the wait that is due sooner wakes it (see arm).
                left = self._deadlines.expire_due()
                wait = self._deadlines.idle if left is None else left
                self._wake_at = time.monotonic() + wait
                self._cond.wait(wait)


class LoopWatchdog:
    """For the async ledger: one timer callback on the event loop, no thread."""

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
        """Finish the operation; ``True`` if its deadline had already ended it."""
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
    """End a connection's socket from outside the call blocked on it.

    The blocked wait wakes to an end of stream and the driver raises, so a black-holed
    network ends in a raise after the timeout rather than a hang. A socket already gone
    needs no shutting down.
    """
    try:
        dup = os.dup(fileno)
    except OSError:
        return
    with socket.socket(fileno=dup) as sock, contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
