"""ledger_core.forks: a child sees a new generation, and a per-process value is built
again there, once, even when a parent thread was building one at the fork."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

from ledger_core import forks
from ledger_core.forks import PerProcess

WAIT = 30.0  # seconds a child may take; it is killed (and the test fails) past them


def _in_child(check: Callable[[], bool]) -> int:
    """``check()`` in a forked child: its exit status (0 when it returned True)."""
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 1
        try:
            code = 0 if check() else 2
        finally:
            os._exit(code)
    hung = threading.Event()

    def kill() -> None:
        hung.set()
        os.kill(pid, 9)

    timer = threading.Timer(WAIT, kill)
    timer.start()
    try:
        status = os.waitpid(pid, 0)[1]
    finally:
        timer.cancel()
    assert not hung.is_set(), "the child hung"
    return os.waitstatus_to_exitcode(status)


def test_a_child_builds_its_own_value_once() -> None:
    built: list[int] = []

    def make() -> object:
        built.append(forks.generation)
        return object()

    parents = object()
    holder = PerProcess(parents, make)
    assert holder.get() is parents
    assert not holder.inherited()
    assert built == []
    born = forks.generation

    def child() -> bool:
        if forks.generation != born + 1 or not holder.inherited():
            return False
        mine = holder.get()
        return mine is not parents and holder.get() is mine and built == [born + 1]

    assert _in_child(child) == 0
    assert holder.get() is parents
    assert forks.generation == born
    assert built == []


def test_a_child_builds_even_if_a_parent_thread_was_building_at_the_fork() -> None:
    building, release = threading.Event(), threading.Event()

    def slow() -> int:
        building.set()
        release.wait(WAIT)
        return 2

    holder = PerProcess(0, slow)
    # A holder of an earlier generation, so the parent's get() builds (holding the lock).
    holder._born = forks.generation - 1
    thread = threading.Thread(target=holder.get)
    thread.start()
    try:
        assert building.wait(WAIT)
        holder._make = lambda: 3  # the child's own build must not wait for the parent's
        assert _in_child(lambda: holder.get() == 3) == 0
    finally:
        release.set()
        thread.join(WAIT)
    assert holder.get() == 2
