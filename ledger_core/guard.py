"""A ledger's standing, one mechanism for every backend.

A ledger whose store forgot or changed fails closed *for good*: no later call may answer
from a store it can no longer name (C6). What decides durability is re-read at most once
per ``period``, by the first operation after it; there is no thread to fork or stop.
"""

from __future__ import annotations

import time
from typing import TypeVar

from .errors import LedgerError

E = TypeVar("E", bound=LedgerError)


class Guard:
    """Failed for good, and when the store's re-check is next due.

    :meth:`due` claims the re-check for the caller (the others go on meanwhile); a
    re-check that could not reach the store calls :meth:`again`, so the next operation
    tries it before answering. A ``period`` of 0 re-checks on every operation.

    A hot path may skip both calls while ``failed is None and time.monotonic() <
    next_due`` (two attribute reads, no call): nothing is failed and nothing is due."""

    __slots__ = ("failed", "next_due", "period")

    def __init__(self, period: float, now: float | None = None) -> None:
        self.period = period
        self.failed: LedgerError | None = None
        self.next_due = (time.monotonic() if now is None else now) + period

    def check(self) -> None:
        """Raise if failed for good: a fresh error chained to the first, so tracebacks
        of many calls do not pile up on one exception object."""
        failed = self.failed
        if failed is None:
            return
        try:
            fresh = type(failed)(*failed.args)
        except Exception:  # a third party's error built another way: the first, again
            raise failed from failed.__cause__
        raise fresh from failed

    def fail(self, error: E) -> E:
        """Fail for good with ``error`` (the first failure stays the cause); return it to raise."""
        if self.failed is None:
            self.failed = error
        return error

    def due(self, now: float | None = None) -> bool:
        """Whether the caller should re-check now; if so, the next is ``period`` later."""
        now = time.monotonic() if now is None else now
        if self.period and now < self.next_due:  # 0: due even to a caller's older clock
            return False
        self.next_due = now + self.period
        return True

    def again(self) -> None:
        """The re-check did not reach the store: due at the next operation."""
        self.next_due = float("-inf")
