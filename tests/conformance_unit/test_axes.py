"""The generated axes draw what they promise: exact lengths, every family, the same draws
for the same seed, and callers that rebuild a factory in a new interpreter."""

from __future__ import annotations

import functools
import sys
from typing import Any

import pytest

from ledger_conformance import LedgerContext
from ledger_conformance.axes import FILLERS, ID_FAMILIES, NAME_FAMILIES, Axes, exact_bytes, run_seed
from ledger_conformance.callers import Job, Spawned, Step, portable
from ledger_core.ids import MAX_ID_BYTES, validate_request_id
from ledger_core.memory import MemoryLedger


@pytest.mark.parametrize("filler", FILLERS)
@pytest.mark.parametrize("size", [100, 255, 256, 513, MAX_ID_BYTES])
def test_exact_bytes(filler: str, size: int) -> None:
    assert len(exact_bytes("head-", size, filler).encode("utf-8")) == size


def test_long_ids_reach_the_limit_and_stay_valid() -> None:
    ids = Axes(7).long_ids("tag", "part")
    sizes = [len(i.encode("utf-8")) for i in ids]
    assert MAX_ID_BYTES in sizes
    assert MAX_ID_BYTES - 1 in sizes
    assert len(set(ids)) == len(ids)
    for request_id in ids:
        validate_request_id(request_id)


def test_same_seed_same_draws_and_every_family_sampled() -> None:
    one, two, other = Axes(11), Axes(11), Axes(12)
    assert one.families("x") == two.families("x")
    assert one.long_ids("t", "x") == two.long_ids("t", "x")
    drawn = [other.families("x"), other.families("y"), Axes(13).families("x")]
    assert len({repr(d) for d in drawn}) > 1  # the seed and the part both matter
    for families, source in ((one.families("x"), ID_FAMILIES), (one.names("x"), NAME_FAMILIES)):
        assert len(families) == len(source)
        for drawn_family, family in zip(families, source.values(), strict=True):
            assert len(drawn_family) >= min(3, len(family))
            assert set(drawn_family) <= set(family)
    wide = Axes(11, wide=True)
    assert [set(f) for f in wide.families("x")] == [set(f) for f in ID_FAMILIES.values()]


@pytest.mark.parametrize("seed", range(40))
def test_every_seed_draws_each_familys_first_pair(seed: int) -> None:
    """A store that merges only ``a b`` and ``a%20b`` is caught on every seed."""
    axes = Axes(seed)
    for drawn, source in ((axes.families("x"), ID_FAMILIES), (axes.names("x"), NAME_FAMILIES)):
        for drawn_family, family in zip(drawn, source.values(), strict=True):
            assert drawn_family[:2] == family[:2]
            assert len(set(drawn_family)) == len(drawn_family)


def test_family_members_are_distinct_valid_ids() -> None:
    members = [m for family in ID_FAMILIES.values() for m in family]
    for request_id in members:
        validate_request_id(request_id)
    for family in ID_FAMILIES.values():
        assert len(set(family)) == len(family)


def test_the_seed_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEDGER_CONFORMANCE_SEED", "4242")
    assert run_seed() == 4242
    monkeypatch.setenv("LEDGER_CONFORMANCE_SEED", "not-a-number")
    with pytest.raises(ValueError, match="LEDGER_CONFORMANCE_SEED"):
        run_seed()


def memory_factory(prefix: str, ctx: LedgerContext) -> Any:
    return MemoryLedger()


def test_portable_factories() -> None:
    """A partial of a module-level callable pickles; a closure does not."""
    bound = functools.partial(memory_factory, "p")
    assert portable(bound) is bound

    def closure(ctx: LedgerContext) -> Any:
        return MemoryLedger()

    assert portable(closure) is None


def test_a_spawned_caller_runs_a_job_and_records_it() -> None:
    """A freshly spawned interpreter opens its own ledger, answers every step and
    records the history's ops (a batch as one op per id)."""
    pool = Spawned(size=1)
    try:
        (caller,) = pool.take(1)
        steps = (
            Step("spend", ("a",)),
            Step("spend", ("a",), gated=True),
            Step("is_spent", ("b",)),
        )
        factory = functools.partial(memory_factory, "p")
        caller.start(Job("label", "sync", steps, "spawned", factory, tuple(sys.path)))
        caller.ready()
        caller.go()
        outcome = caller.outcome()
    finally:
        pool.close()
    assert outcome.answers == [True, False, False]
    assert [(op.kind, op.result) for op in outcome.ops] == [
        ("spend", True),
        ("spend", False),
        ("is_spent", False),
    ]
