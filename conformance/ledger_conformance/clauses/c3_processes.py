"""C3 across processes: a read in one process sees a spend made in another.

A per-process cache of "not spent" answers (a dict at module level, an LRU in front of
the store) is consistent inside one process, since its own spends clear it; only a read
in one process after a spend in another shows it. The parent reads the ids first (so a
cache holds ``False``), forks a child that opens its own ledger through the factory and
reads them too; then the parent spends some, the child reads them again and spends the
others, and the parent reads those, through its old instance and a new one. Sync and
async; only for a ledger with a ``store_id`` (the cross-process promise).
"""

from __future__ import annotations

import asyncio
import multiprocessing
from typing import Any

import pytest

from ..context import Factory, Flavor, LedgerContext, enter_factory
from ..harness import CALL_BOUND, Ledgers, error_text
from .c3_reads import C3
from .common import open_flavor, require_is_spent, require_store_id

IDS = 8  # per direction


async def _call(ledger: Any, method: str, request_id: str) -> object:
    value = getattr(ledger, method)(request_id)
    return await value if asyncio.iscoroutine(value) else value


def _child(
    factory: Factory, label: str, flavor: Flavor, mine: list[str], theirs: list[str], pipe: Any
) -> None:
    """Read ``theirs`` (unspent), wait for the parent's spends, read them again, spend ``mine``."""

    async def run() -> dict[str, list[object]]:
        ledger, cleanup = await enter_factory(factory, LedgerContext(store=label, flavor=flavor))
        try:
            before = [await _call(ledger, "is_spent", i) for i in theirs]
            pipe.send(("ready", before))
            if not pipe.poll(CALL_BOUND) or pipe.recv() != "go":
                raise TimeoutError("the parent did not spend its ids in time")
            after = [await _call(ledger, "is_spent", i) for i in theirs]
            spent = [await _call(ledger, "spend", i) for i in mine]
            return {"after": after, "spent": spent}
        finally:
            await cleanup()

    try:
        pipe.send(("done", asyncio.run(run())))
    except BaseException as exc:
        pipe.send(("error", error_text(exc)))


def _reply(pipe: Any) -> tuple[str, Any]:
    """The child's next message, or an error when it sent none in time."""
    return tuple(pipe.recv()) if pipe.poll(CALL_BOUND) else ("error", "no reply in time")


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
        mp = multiprocessing.get_context("fork")
        ours, its = mp.Pipe()
        child = mp.Process(
            target=_child,
            args=(ledgers.factory, label, flavor, by_child, by_parent, its),
            name="ledger-suite-reader",
        )
        child.start()
        try:
            status, data = _reply(ours)
            assert status == "ready", f"the child process failed: {data}"
            wrong = _wrong(by_parent, data, False)
            assert not wrong, f"a new process read unspent ids as spent: {wrong[:3]}"
            for request_id in by_parent:
                assert parent.spend(request_id) is True, f"{request_id!r}: first spend not True"
            ours.send("go")
            status, data = _reply(ours)
        finally:
            child.join(CALL_BOUND)
            if child.is_alive():
                child.kill()
                child.join(CALL_BOUND)
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
