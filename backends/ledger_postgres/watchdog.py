"""Per-operation deadlines for the sync ledger, with one thread per ledger.

psycopg's sync calls take no timeout, and a black-holed network (packets accepted,
nothing answered) would block them forever. Each operation arms a deadline on its
connection's socket; if it is still armed when the time is up, the watchdog shuts the
socket down and the blocked call raises. Arming is a lock and an append: deadlines of
one ledger share one timeout, so they expire in the order they were armed, and the
thread only wakes when the oldest one is due (or once per timeout when idle).
"""

from __future__ import annotations

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


class Watchdog:
    def __init__(self, timeout: float, name: str) -> None:
        self._timeout = timeout
        self._name = name
        self._queue: deque[Deadline] = deque()
        self._cond = threading.Condition(threading.Lock())
        self._thread: threading.Thread | None = None
        self._stopped = False

    def arm(self, fileno: int) -> Deadline:
        with self._cond:
            # Read the clock under the lock, so the queue stays in deadline order.
            deadline = Deadline(fileno, time.monotonic() + self._timeout)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
            self._queue.append(deadline)
        return deadline

    def disarm(self, deadline: Deadline) -> bool:
        """Finish the operation; ``True`` if its deadline had already ended it."""
        with self._cond:
            deadline.finished = True
            return deadline.expired

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify()

    def _run(self) -> None:
        with self._cond:
            while not self._stopped:
                while self._queue and self._queue[0].finished:
                    self._queue.popleft()
                if not self._queue:
                    # No need to be woken by arm(): anything armed during this wait
                    # expires no sooner than the wait ends. A wake-up per operation
                    # would cost more than the rest of the operation's client work.
                    self._cond.wait(self._timeout)
                    continue
                head = self._queue[0]
                left = head.when - time.monotonic()
                if left > 0:
                    self._cond.wait(left)
                    continue
                # Under the lock: the operation cannot finish and hand its connection
                # to someone else while its socket is being shut down.
                self._queue.popleft()
                head.expired = True
                shutdown_socket(head.fileno)
