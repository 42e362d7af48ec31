"""The fork clause's machinery: children released together, reports over pipes, a hung
child killed within the bound (a hang fails; it never stalls the suite)."""

from __future__ import annotations

import dataclasses
import os
import threading
import time

import pytest

from ledger_conformance.clauses.c1_fork import _fork_children, _report
from ledger_conformance.clauses.common import FORK, forked
from ledger_conformance.harness import CALL_BOUND
from ledger_conformance.history import History
from ledger_conformance.profile import PROFILES
from ledger_core import MemoryLedger, MemoryStore

PROFILE = dataclasses.replace(PROFILES["quick"], fork_processes=3, fork_ids=5, fork_bound=2.0)


class HangsInChild:
    """Waits for a watchdog thread that does not exist after fork (the issue-8 hang)."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.ready = threading.Event()

    def spend(self, request_id: str) -> bool:
        if os.getpid() != self.pid:
            self.ready.wait()  # nobody in the child will ever set it
        return True


def test_every_child_reports_every_call() -> None:
    ledger = MemoryLedger(MemoryStore())
    ids = [f"id-{n}" for n in range(PROFILE.fork_ids)]
    children, problems = _fork_children(ledger, "label", ids, PROFILE)
    assert problems == []
    assert len(children) == PROFILE.fork_processes
    for child in children:
        report = _report(child, problems)
        assert report is not None
        ops = History.from_json(report["ops"]).ops
        # Each child has its own copy of an in-process store: every id is True in each,
        # which is why the clause needs a store_id (and would fail this ledger).
        assert sorted(op.key.split("\x1f")[1] for op in ops) == sorted(ids)
        assert all(op.result is True for op in ops)
    assert ledger.spend("id-0") is True  # the parent's copy never saw the children's spends


def test_a_hung_child_is_killed_within_the_bound() -> None:
    started = time.monotonic()
    children, problems = _fork_children(HangsInChild(), "label", ["a", "b"], PROFILE)
    assert time.monotonic() - started < PROFILE.fork_bound + 5
    assert all(child.killed for child in children)
    assert any("still running after 2 s (killed)" in p for p in problems), problems


def test_a_crashing_child_is_reported() -> None:
    class Crashes:
        def spend(self, request_id: str) -> bool:
            os._exit(9)

    children, problems = _fork_children(Crashes(), "label", ["a"], PROFILE)
    for child in children:
        assert _report(child, problems) is None
    assert any("exited (9) without a report" in p for p in problems), problems


def test_a_failed_body_kills_its_children_at_once() -> None:
    """A clause that failed while its child waits to be told to go on does not wait out
    the child's bound (CALL_BOUND, 60 s) first: the child is killed at once."""
    ours, its = FORK.Pipe()

    def waits_forever() -> None:
        its.send(os.getpid())
        time.sleep(3600)

    def clause() -> None:
        with forked(waits_forever, name="t"):
            pids.append(ours.recv())
            raise AssertionError("the clause failed")

    pids: list[int] = []
    started = time.monotonic()
    with pytest.raises(AssertionError, match="the clause failed"):
        clause()
    assert time.monotonic() - started < CALL_BOUND / 4, "the child was waited for, not killed"
    with pytest.raises(ProcessLookupError):
        os.kill(pids[0], 0)  # killed and reaped
