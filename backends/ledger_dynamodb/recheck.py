"""When the table is re-read, and who waits for it: one ledger's state in one process.

``DescribeTable`` is re-read every ``config_interval`` seconds (0: every operation). While
a re-check is due, no caller answers until one passes: one caller runs it, every other
waits for it within its own deadline (and runs one itself if that one fails). A forked
child starts with its own state, none under way (a parent's caller never finishes one
there). The lock is held for no I/O, so tasks on one loop may take it too.

An operation reads ``due`` and ``next`` without the lock (two attribute reads): only a
caller that finds a re-check due takes it.
"""

from __future__ import annotations

import math
import threading
import time


class Recheck:
    """The table re-check's timing and who runs it."""

    def __init__(self, period: float, next_due: float) -> None:
        self.period = period
        self.next = next_due  # monotonic time the next re-check falls due
        self.due = False  # due, and none has passed since: no caller answers meanwhile
        self.running = False  # one caller runs it; the others wait for it
        self.passed = 0  # re-checks passed: a waiter's cue
        self._lock = threading.Lock()

    def renewed(self) -> Recheck:
        """This state for a forked child: the same timing, nothing under way."""
        return Recheck(self.period, self.next)

    def again(self) -> None:
        """Due at the next operation (the store looked as if it forgot)."""
        self.next = -math.inf

    def role(self, seen: int | None) -> tuple[bool, int] | None:
        """``None``: answer (nothing due, or a re-check passed since ``seen``); else whether
        this caller runs the re-check (none under way) or waits, and the count it saw."""
        with self._lock:
            if seen is not None and self.passed != seen:
                return None
            if not self.due:
                now = time.monotonic()
                if self.period and now < self.next:  # 0: due even to a caller's older clock
                    return None
                self.due, self.next = True, now + self.period
            runs = not self.running
            self.running = True
            return runs, self.passed

    def done(self, passed: bool) -> None:
        with self._lock:
            self.running = False
            if passed:
                self.due = False
                self.passed += 1
