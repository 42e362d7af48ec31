"""The scratch guard lives in the core (``ledger_core.scratch``), so every backend's
``remove_scratch`` hook and the suite share one definition; the memory backend's hook
obeys it like every other (the real-server backends: tests/<store>/test_scratch_removal)."""

from __future__ import annotations

import pytest

from ledger_conformance import scratch as suite_scratch
from ledger_core.errors import LedgerError, ScratchRefused
from ledger_core.scratch import SCRATCH_PREFIX, is_scratch_prefix, prefix_bounds
from tests.scratch_removal import NOT_SCRATCH, exercise, new_prefix, refuses


def test_one_definition() -> None:
    assert suite_scratch.is_scratch_prefix is is_scratch_prefix
    assert new_prefix().startswith(f"{SCRATCH_PREFIX}-")
    assert is_scratch_prefix(new_prefix())


@pytest.mark.parametrize("bad", NOT_SCRATCH)
def test_the_guard_refuses_before_any_io(bad: str) -> None:
    assert not is_scratch_prefix(bad)
    with pytest.raises(ScratchRefused) as raised:
        prefix_bounds(bad)
    assert isinstance(raised.value, LedgerError)
    assert isinstance(raised.value, ValueError)


def test_the_bounds_are_exactly_the_prefix() -> None:
    low, high = prefix_bounds("ledger-conformance-a1b2c3-")
    assert (low, high) == ("ledger-conformance-a1b2c3-", "ledger-conformance-a1b2c3.")


def test_memory_removes_exactly_the_scratch_namespaces() -> None:
    exercise("memory://scratch-guard-exercise")


def test_memory_refuses_any_other_prefix() -> None:
    refuses("memory://scratch-guard-refuses")


def test_removal_opens_with_a_bound_fit_for_a_bulk_delete() -> None:
    """A thorough check's scratch timed out at MongoDB's 5 s default on nx-27017."""
    from ledger_core.scratch import SCRATCH_TIMEOUT, scratch_request
    from ledger_core.urls import LedgerURL

    plain = scratch_request(LedgerURL.parse("mongodb://h/db?timeout=5"))
    assert plain.seconds("timeout", 0.0) == SCRATCH_TIMEOUT
    assert plain.create() is False
    longer = scratch_request(LedgerURL.parse("postgresql://h/db?timeout=900"))
    assert longer.seconds("timeout", 0.0) == 900.0
