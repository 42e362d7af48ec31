"""The shared guard: failed for good, and a re-check claimed by one caller."""

from __future__ import annotations

import pytest

from ledger_core.errors import LedgerClosed, UnsafeStoreConfig
from ledger_core.guard import Guard


def test_a_failure_is_for_good_and_raised_fresh_each_time() -> None:
    guard = Guard(5.0, now=0.0)
    guard.check()
    first = guard.fail(UnsafeStoreConfig("the store forgot"))
    guard.fail(LedgerClosed("later"))
    raised = []
    for _ in range(2):
        with pytest.raises(UnsafeStoreConfig, match="the store forgot") as info:
            guard.check()
        assert info.value.__cause__ is first
        raised.append(info.value)
    assert raised[0] is not raised[1]


def test_the_recheck_is_due_once_per_period_and_again_after_a_miss() -> None:
    guard = Guard(5.0, now=0.0)
    assert not guard.due(4.9)
    assert guard.due(5.0)
    assert not guard.due(9.9)  # claimed at 5.0: the others go on
    guard.again()
    assert guard.due(6.0)
    assert not guard.due(10.9)
    assert guard.due(11.0)


def test_a_zero_period_rechecks_on_every_operation() -> None:
    guard = Guard(0.0, now=0.0)
    assert all(guard.due(t) for t in (0.0, 0.0, 1.0, 0.5))  # 0.5: read before 1.0 claimed


class _Built(UnsafeStoreConfig):
    def __init__(self, table: str, why: str) -> None:
        super().__init__(f"table {table}: {why}")


def test_an_error_built_another_way_is_raised_itself() -> None:
    guard = Guard(5.0, now=0.0)
    first = guard.fail(_Built("t", "restored"))
    with pytest.raises(_Built, match="table t: restored") as info:
        guard.check()
    assert info.value is first


def test_the_hot_path_test_never_skips_a_due_recheck_or_a_failure() -> None:
    """A hot path skips ``check``/``due`` while ``failed is None and now < next_due``:
    that must be false whenever ``due`` would say True or ``check`` would raise."""

    def skipped(guard: Guard, now: float) -> bool:
        return guard.failed is None and now < guard.next_due

    guard = Guard(5.0, now=0.0)
    assert skipped(guard, 4.9)
    assert not skipped(guard, 5.0)
    assert guard.due(5.0)
    guard.again()
    assert not skipped(guard, 6.0)
    assert guard.due(6.0)
    zero = Guard(0.0, now=0.0)
    assert not skipped(zero, 0.0)  # a zero period re-checks on every operation
    assert zero.due(0.0)
    assert not skipped(zero, 0.0)
    guard.fail(UnsafeStoreConfig("gone"))
    assert not skipped(guard, 6.5)
