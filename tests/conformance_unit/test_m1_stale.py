"""M1 after a forget: a stale instance's spend may have written into the new store before
its identity proof failed (MongoDB inserts, then reads the genesis), so the history keeps
it as a spend that may have landed; its answers are still never judged."""

from __future__ import annotations

from ledger_conformance.clauses.m1_model import STALE, judged
from ledger_conformance.history import Op, check

KEY = "s0\x1fid-0"


def test_a_stale_spend_that_raised_explains_a_later_refusal() -> None:
    ops = [
        Op("store 0 instance 0" + STALE, "spend", KEY, 1, 2, None, "forgot: fails closed"),
        Op("store 0 instance 1", "spend", KEY, 3, 4, False, None),
    ]
    assert check(ops[1:]), "without the stale write the refusal has no cause"
    assert check(judged(ops)) == []


def test_a_stale_true_is_a_possible_write_not_a_winner() -> None:
    ops = [
        Op("store 0 instance 0" + STALE, "spend", KEY, 1, 2, True, None),
        Op("store 0 instance 1", "spend", KEY, 3, 4, True, None),
    ]
    assert check(judged(ops)) == [], "the stale True is no second winner"
    (stale, _) = judged(ops)
    assert not stale.ok


def test_stale_reads_and_refusals_are_not_judged() -> None:
    ops = [
        Op("store 0 instance 0" + STALE, "is_spent", KEY, 1, 2, True, None),
        Op("store 0 instance 0" + STALE, "spend", KEY, 3, 4, False, None),
        Op("store 0 instance 1", "is_spent", KEY, 5, 6, False, None),
    ]
    assert [op.process for op in judged(ops)] == ["store 0 instance 1"]
