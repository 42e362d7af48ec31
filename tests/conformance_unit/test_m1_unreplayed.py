"""M1 when a failing sequence does not fail the same way on replay (a store that answers
differently under load): the report shows the first failure, not only Hypothesis's
"could not replay"."""

from __future__ import annotations

import itertools
from typing import Any, cast

import pytest
from hypothesis import Phase, settings
from hypothesis import strategies as st
from hypothesis.errors import Flaky
from hypothesis.stateful import RuleBasedStateMachine, rule, run_state_machine_as_test

from ledger_conformance.clauses.m1_model import Run, unreplayed


def test_a_failure_that_does_not_replay_is_reported() -> None:
    run = Run(cast(Any, None), "sync", None, None, False, False, False, False)
    calls = itertools.count()

    class OnceWrong(RuleBasedStateMachine):
        @rule(n=st.integers(0, 3))
        @run.recorded
        def spend(self, n: int) -> None:
            assert next(calls) != 3, "spend of a new id answered False"

    once = settings(max_examples=10, database=None, phases=[Phase.generate, Phase.shrink])
    with pytest.raises(Flaky) as caught:
        run_state_machine_as_test(OnceWrong, settings=once)
    assert isinstance(run.first, AssertionError)
    text = unreplayed(run, caught.value)
    assert "spend of a new id answered False" in text
    assert "not shrunk" in text


def test_without_a_failure_seen_it_says_so() -> None:
    run = Run(cast(Any, None), "sync", None, None, False, False, False, False)
    assert "could not replay" in unreplayed(run, Flaky("inconsistent data generation"))
