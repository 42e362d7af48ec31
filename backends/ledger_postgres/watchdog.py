"""Per-operation deadlines: a black-holed network ends in a raise, not a hang.

psycopg's calls take no timeout, and a network that accepts packets and answers none
would block them forever. Each operation arms a deadline on its connection's socket;
if it is still armed when time is up, the socket is shut down and the blocked call
raises. Deadlines of one ledger share one timeout, so they expire in the order they
were armed: arming is an append, and the one timer (a thread for the sync ledger, a
loop callback for the async one) only wakes when the oldest is due, or once per
timeout when idle. A wake-up per operation would cost more than the operation's
client-side work.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque

from .rules import shutdown_socket


class Deadline:
    __slots__ = ("expired", "fileno", "finished", "when")

    def __init__(self, fileno: int, when: float) -> None:
        self.fileno = fileno
        self.when = when
        self.finished = False
        self.expired = False


class DeadlineQueue:
    """The deadlines in arming order, and the one rule for expiring them.

    Not locked: the thread watchdog calls it under its lock, the loop watchdog from
    its event loop only.
    """

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self._queue: deque[Deadline] = deque()

    def arm(self, fileno: int) -> Deadline:
        deadline = Deadline(fileno, time.monotonic() + self.timeout)
        self._queue.append(deadline)
        return deadline

    @staticmethod
    def finish(deadline: Deadline) -> bool:
        """The operation is over; ``True`` if its deadline had already ended it."""
        deadline.finished = True
        return deadline.expired

    def expire_due(self) -> float | None:
        """Shut the sockets of operations past their deadline; seconds until the next
        deadline, or ``None`` when nothing is armed."""
        queue = self._queue
        while queue:
            head = queue[0]
            if head.finished:
                queue.popleft()
                continue
            left = head.when - time.monotonic()
            if left > 0:
                return left
            queue.popleft()
            head.expired = True
            shutdown_socket(head.fileno)
        return None


class Watchdog:
    """For the sync ledger: one daemon thread, started on first use."""

    def __init__(self, timeout: float, name: str) -> None:
        self._deadlines = DeadlineQueue(timeout)
        self._name = name
        self._cond = threading.Condition(threading.Lock())
        self._thread: threading.Thread | None = None
        self._stopped = False

    def arm(self, fileno: int) -> Deadline:
        with self._cond:  # under the lock, so the queue stays in deadline order
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
            return self._deadlines.arm(fileno)

    def disarm(self, deadline: Deadline) -> bool:
        """Finish the operation; ``True`` if its deadline had already ended it."""
        with self._cond:
            return DeadlineQueue.finish(deadline)

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify()

    def _run(self) -> None:
        with self._cond:
            while not self._stopped:
                # Under the lock: an operation cannot finish and hand its connection to
                # someone else while its socket is being shut down. Anything armed
                # during an idle wait is due no sooner than the wait ends.
                left = self._deadlines.expire_due()
                self._cond.wait(self._deadlines.timeout if left is None else left)


class LoopWatchdog:
    """For the async ledger: one timer callback on the event loop, no thread."""

    def __init__(self, timeout: float) -> None:
        self._deadlines = DeadlineQueue(timeout)
        self._timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def arm(self, fileno: int) -> Deadline:
        deadline = self._deadlines.arm(fileno)
        loop = asyncio.get_running_loop()
        if self._timer is None or self._loop is not loop:
            self._loop = loop
            self._timer = loop.call_later(self._deadlines.timeout, self._tick)
        return deadline

    @staticmethod
    def disarm(deadline: Deadline) -> bool:
        """Finish the operation; ``True`` if its deadline had already ended it."""
        return DeadlineQueue.finish(deadline)

    def _tick(self) -> None:
        self._timer = None
        left = self._deadlines.expire_due()
        if left is not None and self._loop is not None and not self._loop.is_closed():
            self._timer = self._loop.call_later(left, self._tick)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
