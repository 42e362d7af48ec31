"""Fork safety's one mechanism: a process generation, bumped in every forked child.

A ledger opened in a parent and inherited by a forked child must never use the parent's
sockets, threads or locks there. ``generation`` is 0 in the process that imported this
module and one more in each child (``os.register_at_fork``), so telling a child from its
parent is an int compare, never a system call per call. Read it as ``forks.generation``
(``from ledger_core.forks import generation`` would keep the importing process's value).

:class:`PerProcess` holds what one process may use (a client, a pool, threads, a lock)
and builds a new one in a child's first call; the parent's is dropped, never closed.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")

generation = 0
# New in every child: an inherited lock may be held by a parent thread the child lacks.
# Reentrant, so one value's ``make`` may get another's.
_lock = threading.RLock()


def _forked() -> None:
    global generation, _lock
    generation += 1
    _lock = threading.RLock()


os.register_at_fork(after_in_child=_forked)


class PerProcess(Generic[T]):
    """``value`` in the process that built it; in a forked child, ``make()``'s, built at
    the child's first :meth:`get` by one thread (the others wait for it and share it).
    The parent's value is dropped, never closed or used: it is not the child's. An owner
    whose process state is several attributes passes ``None`` and a ``make`` that
    rebuilds them: every :meth:`get` after it returned sees them rebuilt."""

    __slots__ = ("_born", "_make", "_value")

    def __init__(self, value: T, make: Callable[[], T]) -> None:
        self._value, self._make, self._born = value, make, generation

    def get(self) -> T:
        if self._born == generation:  # the hot path: one int compare
            return self._value
        with _lock:
            if self._born != generation:
                self._value, self._born = self._make(), generation
        return self._value

    def inherited(self) -> bool:
        """Whether the value is a parent's (a child that has not called :meth:`get` yet):
        such a value is never closed here."""
        return self._born != generation
