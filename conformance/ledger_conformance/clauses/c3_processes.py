"""C3 across processes: a read in one process sees a spend made in another.

A per-process cache of "not spent" answers is consistent inside one process (its own
spends clear it); only reads across processes show it. Only for a ledger with a
``store_id`` (the cross-process promise).
"""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest

from ..context import Flavor, LedgerContext
from ..harness import CALL_BOUND, Ledgers
from .c3_reads import C3
from .common import (
    FORK,
    call,
    forked,
    in_child,
    open_flavor,
    reply,
    require_is_spent,
    require_store_id,
)

IDS = 8  # per direction


async def _child(ledger: Any, pipe: Any, mine: list[str], theirs: list[str]) -> object:
    """Read ``theirs`` (unspent), wait for the parent's spends, read them again, spend ``mine``."""
    before = [await call(ledger, "is_spent", i) for i in theirs]
    pipe.send(("ready", before))
    if not pipe.poll(CALL_BOUND) or pipe.recv() != "go":
        raise TimeoutError("the parent did not spend its ids in time")
    after = [await call(ledger, "is_spent", i) for i in theirs]
    spent = [await call(ledger, "spend", i) for i in mine]
    return {"after": after, "spent": spent}


def _wrong(ids: list[str], answers: list[object], expected: bool) -> list[str]:
    return [f"{i!r} -> {a!r}" for i, a in zip(ids, answers, strict=True) if a is not expected]


class C3Processes:
    @C3()
    @pytest.mark.parametrize("flavor", ["sync", "async"])
    def test_C3_reads_across_processes(self, ledgers: Ledgers, flavor: Flavor) -> None:
        label = ledgers.label()
        parent = open_flavor(ledgers, label, flavor)
        require_store_id(parent, "reads that see every spend")
        require_is_spent(parent)
        by_child, by_parent = ledgers.ids(IDS, "child"), ledgers.ids(IDS, "parent")
        for request_id in by_child + by_parent:  # a per-process cache now holds False
            assert parent.is_spent(request_id) is False, f"{request_id!r} read spent, unspent"
        ours, its = FORK.Pipe()
        ctx = LedgerContext(store=label, flavor=flavor)
        body = partial(_child, pipe=its, mine=by_child, theirs=by_parent)
        with forked(lambda: in_child(ledgers.factory, ctx, body, its.send), name="reader"):
            status, data = reply(ours)
            assert status == "ready", f"the child process failed: {data}"
            wrong = _wrong(by_parent, data, False)
            assert not wrong, f"a new process read unspent ids as spent: {wrong[:3]}"
            for request_id in by_parent:
                assert parent.spend(request_id) is True, f"{request_id!r}: first spend not True"
            ours.send("go")
            status, data = reply(ours)
        assert status == "done", f"the child process failed: {data}"
        problems = [
            f"the child read the parent's spends as unspent: {w}"
            for w in _wrong(by_parent, data["after"], True)
        ]
        problems += [f"the child's first spend: {w}" for w in _wrong(by_child, data["spent"], True)]
        fresh = open_flavor(ledgers, label, flavor)
        for name, handle in (("its old instance", parent), ("a new instance", fresh)):
            answers = [handle.is_spent(i) for i in by_child]
            problems += [
                f"the parent ({name}) read the child's spends as unspent: {w}"
                for w in _wrong(by_child, answers, True)
            ]
        assert not problems, (
            f"{len(problems)} cross-process read(s) wrong: " + "; ".join(problems[:6]) + ". "
            "Usual causes: a per-process cache of answers (a dict at module level, an LRU in "
            "front of the store) that only this process's own spends clear; a read from a "
            "replica or a connection's snapshot. Look at is_spent's read path."
        )
