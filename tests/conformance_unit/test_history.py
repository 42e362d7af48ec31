"""The linearizability checker on hand-made histories, a brute-force oracle, and the model."""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ledger_conformance.history import (
    FINAL,
    History,
    Op,
    OpKind,
    Violation,
    check,
    format_violations,
)

KEY = "req-1"


def spend(process: str, start: int, end: int, result: object = None, *, raised: bool = False) -> Op:
    return Op(process, "spend", KEY, start, end, None if raised else result, _err(raised))


def read(process: str, start: int, end: int, result: object = None, *, raised: bool = False) -> Op:
    return Op(process, "is_spent", KEY, start, end, None if raised else result, _err(raised))


def _err(raised: bool) -> str | None:
    return "AmbiguousSpend: connection lost" if raised else None


def clauses(ops: Sequence[Op]) -> list[str]:
    return [v.clause for v in check(ops)]


# -- linearizable histories -------------------------------------------------------------


@pytest.mark.parametrize(
    "ops",
    [
        pytest.param([], id="empty"),
        pytest.param([spend("a", 0, 10, True)], id="one winner"),
        pytest.param([read("a", 0, 10, False)], id="one fresh read"),
        pytest.param(
            [spend("a", 0, 10, True), spend("b", 1, 9, False), spend("c", 2, 30, False)],
            id="overlapping winner and losers",
        ),
        pytest.param(
            [spend("a", 10, 20, True), spend("b", 0, 15, False)],
            id="loser invoked first but overlapping the winner",
        ),
        pytest.param(
            [spend("a", 0, 10, True), spend("b", 20, 30, False), spend("c", 40, 50, False)],
            id="sequential winner then losers",
        ),
        pytest.param(
            [
                spend("a", 10, 20, True),
                read("r1", 5, 15, True),
                read("r2", 12, 25, False),
                read("r3", 0, 5, False),
                read("r4", 30, 40, True),
            ],
            id="reads racing the flip",
        ),
        pytest.param(
            [spend("a", 0, 10, raised=True), spend("b", 20, 30, False), read("r", 35, 40, True)],
            id="raised spend that took effect",
        ),
        pytest.param(
            [spend("a", 0, 10, raised=True), read("r", 20, 30, False)],
            id="raised spend that did not take effect",
        ),
        pytest.param(
            [spend("a", 0, 10, raised=True), read("r", 20, 30, False), read("s", 40, 50, True)],
            id="raised spend that took effect after its completion",
        ),
        pytest.param(
            [spend("a", 0, 10, raised=True), spend("b", 20, 30, True)],
            id="raised spend that did not land, a later winner",
        ),
        pytest.param(
            [spend("a", 0, 10, True), read("r", 5, 8, raised=True), read(FINAL, 100, 110, True)],
            id="final read sees the record; raised reads say nothing",
        ),
        pytest.param(
            [spend("a", 0, 10, raised=True), read(FINAL, 100, 110, False)],
            id="final read after a spend that never landed",
        ),
        pytest.param(
            [spend("a", 0, 10, True), spend("b", 10, 20, False)],
            id="touching stamps in the right order",
        ),
    ],
)
def test_linearizable(ops: list[Op]) -> None:
    assert check(ops) == []


def test_keys_are_independent() -> None:
    ops = [
        Op("a", "spend", "k1", 0, 10, True, None),
        Op("b", "spend", "k2", 0, 10, True, None),
        Op("c", "is_spent", "k3", 20, 30, False, None),
    ]
    assert check(ops) == []


# -- non-linearizable histories ---------------------------------------------------------


def test_two_winners_is_c1() -> None:
    ops = [spend("a", 0, 10, True), spend("b", 5, 15, True), spend("c", 6, 7, False)]
    (violation,) = check(ops)
    assert violation.clause == "C1"
    assert violation.key == KEY
    assert set(violation.ops) == {ops[0], ops[1]}
    assert "2 spends returned True" in violation.message


def test_loser_completed_before_winner_invoked_is_c1() -> None:
    loser, winner = spend("b", 0, 10, False), spend("a", 20, 30, True)
    (violation,) = check([winner, loser])
    assert violation.clause == "C1"
    assert violation.ops == (loser, winner)


def test_loser_with_no_possible_recorder_is_c1() -> None:
    (violation,) = check([spend("a", 0, 10, False)])
    assert violation.clause == "C1"
    assert "no spend could have recorded" in violation.message


def test_read_spent_with_no_possible_recorder_is_c3() -> None:
    (violation,) = check([read("r", 0, 10, True)])
    assert violation.clause == "C3"
    assert "no spend could have recorded" in violation.message


def test_read_spent_before_the_flip_could_happen_is_c3() -> None:
    early, winner = read("r", 0, 10, True), spend("a", 20, 30, True)
    (violation,) = check([early, winner])
    assert violation.clause == "C3"
    assert violation.ops == (early, winner)


def test_read_spent_before_a_raised_spend_began_is_c3() -> None:
    early, maybe = read("r", 0, 10, True), spend("a", 20, 30, raised=True)
    assert clauses([early, maybe]) == ["C3"]


def test_stale_read_after_completed_winner_is_c3() -> None:
    winner, stale = spend("a", 0, 10, True), read("r", 20, 30, False)
    (violation,) = check([winner, stale])
    assert violation.clause == "C3"
    assert violation.ops == (winner, stale)
    assert "stale" in violation.message


def test_read_unspent_after_a_read_spent_is_c3() -> None:
    # The winner is still running, but a completed read already saw the flip.
    ops = [spend("a", 0, 100, True), read("r", 10, 20, True), read("s", 30, 40, False)]
    (violation,) = check(ops)
    assert violation.clause == "C3"
    assert violation.ops == (ops[1], ops[2])


def test_read_unspent_after_a_loser_completed_is_c3() -> None:
    ops = [spend("a", 0, 10, raised=True), spend("b", 20, 30, False), read("s", 40, 50, False)]
    assert clauses(ops) == ["C3"]


def test_lost_record_at_final_read_is_c2() -> None:
    winner, final = spend("a", 0, 10, True), read(FINAL, 100, 110, False)
    (violation,) = check([winner, final])
    assert violation.clause == "C2"
    assert violation.ops == (winner, final)
    assert "lost" in violation.message


def test_final_read_after_a_loser_is_c2() -> None:
    ops = [spend("a", 0, 10, raised=True), spend("b", 20, 30, False), read(FINAL, 40, 50, False)]
    assert clauses(ops) == ["C2"]


@pytest.mark.parametrize(("kind", "clause"), [("spend", "C1"), ("is_spent", "C3")])
@pytest.mark.parametrize("result", [1, 0, None, "True"])
def test_non_bool_results(kind: OpKind, clause: str, result: object) -> None:
    op = Op("a", kind, KEY, 0, 10, result, None)
    found = check([op])
    assert found[0].clause == clause
    assert found[0].ops == (op,)
    assert repr(result) in found[0].message


def test_non_bool_spend_may_have_recorded() -> None:
    # The spend answered 1: broken (C1), but a later loser is then not a second fault.
    ops = [spend("a", 0, 10, 1), spend("b", 20, 30, False)]
    assert clauses(ops) == ["C1"]


def test_violations_are_sorted_by_key_and_formatted() -> None:
    ops = [
        Op("a", "is_spent", "zz", 0, 1, True, None),
        Op("a", "is_spent", "aa", 0, 1, True, None),
    ]
    found = check(ops)
    assert [v.key for v in found] == ["aa", "zz"]
    text = format_violations(found, limit=1)
    assert "C3 on 'aa'" in text
    assert "1 more" in text


# -- recording ------------------------------------------------------------------------


def test_record_times_returns_and_reraises() -> None:
    history = History()
    assert history.record("t1", "spend", "k", lambda: True) is True

    def boom() -> bool:
        raise ConnectionError("gone")

    with pytest.raises(ConnectionError):
        history.record("t2", "spend", "k", boom)
    first, second = history.ops
    assert first == Op("t1", "spend", "k", first.invoke_ns, first.complete_ns, True, None)
    assert first.invoke_ns <= first.complete_ns <= second.invoke_ns <= second.complete_ns
    assert second.error == "ConnectionError: gone"
    assert second.result is None
    assert not second.ok


def test_record_async() -> None:
    history = History()

    async def returns() -> bool:
        await asyncio.sleep(0)
        return False

    async def raises() -> bool:
        raise TimeoutError("slow")

    async def main() -> None:
        assert await history.record_async("task1", "is_spent", "k", returns) is False
        with pytest.raises(TimeoutError):
            await history.record_async("task2", "spend", "k", raises)

    asyncio.run(main())
    ok, failed = history.ops
    assert (ok.process, ok.kind, ok.result, ok.error) == ("task1", "is_spent", False, None)
    assert failed.error == "TimeoutError: slow"


def test_record_is_thread_safe() -> None:
    history = History()
    workers, per_worker = 8, 200
    barrier = threading.Barrier(workers)

    def work(n: int) -> None:
        barrier.wait(timeout=10)
        for i in range(per_worker):
            history.record(f"t{n}", "is_spent", f"k{i}", lambda: False)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert len(history) == workers * per_worker
    assert check(history) == []


def test_ops_is_a_copy_and_extend_adds() -> None:
    history = History()
    history.extend([spend("a", 0, 1, True), spend("b", 2, 3, False)])
    history.ops.clear()
    assert len(history.ops) == 2


def test_json_round_trip() -> None:
    history = History(
        [spend("a", 0, 10, True), read("b", 5, 6, raised=True), spend("c", 7, 8, object())]
    )
    shipped = json.loads(json.dumps(history.to_json()))
    back = History.from_json(shipped)
    assert back.ops[:2] == history.ops[:2]
    assert isinstance(back.ops[2].result, str)  # a repr: still not a bool
    assert [v.clause for v in check(back)] == ["C1"]


@pytest.mark.parametrize(
    "bad",
    [
        {"kind": "delete"},
        {"invoke_ns": 10, "complete_ns": 5},
        {"invoke_ns": "0"},
    ],
)
def test_from_json_rejects_garbage(bad: dict[str, object]) -> None:
    item = {**spend("a", 0, 10, True).__dict__, **bad}
    with pytest.raises(ValueError):
        History.from_json([item])


# -- properties -----------------------------------------------------------------------

# A step of a sequential run: (kind, key index, raised?, did a raised spend take effect?)
_steps = st.lists(
    st.tuples(
        st.sampled_from(["spend", "is_spent"]),
        st.integers(0, 2),
        st.booleans(),
        st.booleans(),
    ),
    max_size=40,
)
_widths = st.lists(st.tuples(st.integers(0, 60), st.integers(0, 60)), min_size=41, max_size=41)


def _sequential_history(
    steps: list[tuple[str, int, bool, bool]],
    widths: list[tuple[int, int]],
    finals: bool,
) -> list[Op]:
    """Run the model one op at a time at instants 10, 20, ...; widen each interval."""
    spent: dict[str, bool] = {}
    ops: list[Op] = []
    for i, (kind, key_n, raised, landed) in enumerate(steps):
        key, point = f"k{key_n}", 10 * (i + 1)
        left, right = widths[i]
        start, end = point - left, point + right
        state = spent.get(key, False)
        if kind == "spend":
            if raised:
                if landed:
                    spent[key] = True
                    end = start + right  # may complete before it took effect
                ops.append(Op(f"p{i}", "spend", key, start, end, None, "TimeoutError: x"))
            else:
                spent[key] = True
                ops.append(Op(f"p{i}", "spend", key, start, end, not state, None))
        else:
            error = "TimeoutError: x" if raised else None
            ops.append(Op(f"p{i}", "is_spent", key, start, end, None if raised else state, error))
    if finals:
        end_point = 10 * (len(steps) + 1) + 100
        for key_n in range(3):
            key = f"k{key_n}"
            ops.append(
                Op(FINAL, "is_spent", key, end_point, end_point + 1, spent.get(key, False), None)
            )
    return ops


@settings(max_examples=300, deadline=None)
@given(steps=_steps, widths=_widths, finals=st.booleans())
def test_sequential_runs_with_widened_intervals_are_accepted(
    steps: list[tuple[str, int, bool, bool]], widths: list[tuple[int, int]], finals: bool
) -> None:
    ops = _sequential_history(steps, widths, finals)
    assert check(ops) == [], format_violations(check(ops))


def _brute_force_linearizable(ops: list[Op]) -> bool:
    """The definition, by search: some order, consistent with real time, explains all."""
    return all(_brute_key([op for op in ops if op.key == key]) for key in {op.key for op in ops})


def _brute_key(ops: list[Op]) -> bool:
    raised_spends = [op for op in ops if op.error is not None and op.kind == "spend"]
    definite = [op for op in ops if op.error is None]
    # Each raised spend either never took effect, or took effect at some instant after
    # its invoke: an unbounded op that nothing is forced to follow.
    for landed in itertools.product([False, True], repeat=len(raised_spends)):
        chosen = definite + [op for op, on in zip(raised_spends, landed, strict=False) if on]
        if any(_order_ok(order) for order in itertools.permutations(chosen)):
            return True
    return False


def _order_ok(order: tuple[Op, ...]) -> bool:
    for i, later in enumerate(order):
        for earlier in order[i + 1 :]:
            # `earlier` sits after `later` in the order but finished before it began.
            if earlier.error is None and earlier.complete_ns <= later.invoke_ns:
                return False
    spent = False
    for op in order:
        if op.kind == "spend":
            if op.error is None and op.result is not (not spent):
                return False
            spent = True
        elif op.result is not spent:
            return False
    return True


_small_op = st.builds(
    lambda kind, start, width, outcome: Op(
        "p",
        kind,
        KEY,
        start,
        start + width,
        None if outcome is None else outcome,
        "TimeoutError: x" if outcome is None else None,
    ),
    st.sampled_from(["spend", "is_spent"]),
    st.integers(0, 6),
    st.integers(1, 4),  # a real call takes time: stamps bracket it
    st.sampled_from([True, False, None]),
)


@settings(max_examples=1500, deadline=None)
@given(ops=st.lists(_small_op, max_size=6))
def test_checker_agrees_with_brute_force(ops: list[Op]) -> None:
    assert (check(ops) == []) == _brute_force_linearizable(ops), [str(v) for v in check(ops)]


def test_violation_is_a_frozen_value() -> None:
    v = Violation("C1", "k", "m", ())
    with pytest.raises(AttributeError):
        v.clause = "C2"  # type: ignore[misc]
