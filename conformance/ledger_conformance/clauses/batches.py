"""Batches (optional ``spend_many`` / ``is_spent_many``): each answer is what the single
call would say, and a batch races single spends like any other caller.

A batch path is a second implementation of spend and read (a multi-row insert, a
pipeline, an unordered write) that migration and bulk callers use: one that truncates
long ids, answers True for an id it did not record, or misses a duplicate in its own
batch passes every single-call clause. Ids: long, edge and look-alike.
"""

from __future__ import annotations

import pytest

from ..context import Flavor
from ..declare import SPEND_MANY
from ..harness import Handle, Ledgers
from .c1_callers import race_ids
from .c1_once import C1
from .c3_reads import C3
from .c8_ids import shown
from .common import (
    assert_linearizable,
    assert_one_winner,
    not_applicable,
    partly,
    require_is_spent,
)
from .drawn import Who, drawn_ids, race, record_batch, replayable, usable

CHUNK = 4  # ids per round of the batch race
FLAVORS: tuple[Flavor, Flavor] = ("sync", "async")


def _batching(
    ledgers: Ledgers, name: str, request: pytest.FixtureRequest, method: str
) -> list[Handle]:
    """Every variant offering ``method``, each on a fresh store of its own (a variant
    without it: partly)."""
    handles = [ledgers.open(ledgers.label(f"{name}-{flavor}"), flavor) for flavor in FLAVORS]
    if handles[0].flavor == handles[1].flavor:  # the factory has one shape
        handles = handles[:1]
    offered = [h for h in handles if callable(getattr(h.ledger, method, None))]
    for handle in handles:
        if handle not in offered:
            partly(request, f"the {handle.flavor} variant has no {method} (the other one has)")
    if not offered:
        not_applicable(f"the ledger has no {method}")
    return offered


def _compare(
    problems: list[str], what: str, ids: list[str], answers: object, expected: list[bool]
) -> None:
    if not isinstance(answers, list) or len(answers) != len(ids):
        problems.append(f"{what} of {len(ids)} ids answered {answers!r:.200}, not a list of bools")
        return
    problems += [
        f"{what}: {shown(rid)} answered {got!r}, the single call's answer is {want}"
        for rid, got, want in zip(ids, answers, expected, strict=True)
        if got is not want
    ]


class Batches:
    @C1(SPEND_MANY)
    def test_C1_axes_spend_many(self, request: pytest.FixtureRequest, ledgers: Ledgers) -> None:
        """spend_many answers what spend would (duplicates in a batch included) on long
        and edge ids; single calls agree afterwards; batches and single spends
        of every flavor (and a forked batch) raced on each id: one True."""
        problems: list[str] = []
        with replayable(ledgers) as axes:
            for handle in _batching(ledgers, "batch", request, "spend_many"):
                ids = drawn_ids(ledgers, axes, f"batch-{handle.flavor}")
                single, batched = ids[::3], ids
                spent: set[str] = set()
                for rid in single:
                    if handle.spend(rid, "single") is not True:
                        problems.append(f"{handle.flavor}: the first spend of {shown(rid)}")
                    spent.add(rid)
                batch = [*batched, batched[1], batched[-1]]  # with duplicates
                expected = []
                for rid in batch:
                    expected.append(rid not in spent)
                    spent.add(rid)
                answers = record_batch(ledgers, handle, "spend_many", batch, "batch")
                _compare(problems, f"{handle.flavor} spend_many", batch, answers, expected)
                again = record_batch(ledgers, handle, "spend_many", ids, "again")
                _compare(
                    problems, f"{handle.flavor} spend_many again", ids, again, [False] * len(ids)
                )
                problems += [
                    f"{handle.flavor}: spend of {shown(rid)} won after spend_many recorded it"
                    for rid in ids
                    if handle.spend(rid, "after") is not False
                ]
            assert not problems, (
                f"{len(problems)} batch answer(s) disagree with single calls:\n  "
                + "\n  ".join(problems[:8])
                + "\nUsual causes: a batch path that encodes ids differently (truncated, "
                "normalized), that reports its write count rather than each id's outcome, "
                "or that misses a duplicate within its own batch. Look at spend_many."
            )
            label = ledgers.label("batch-race")
            probe = ledgers.open(label)
            whos = [
                Who("thread", "sync", "spend_many"),
                Who("thread", "async", "spend_many"),
                Who("thread", "sync"),
                Who("thread", "async"),
                Who("fork", "sync", "spend_many"),
            ]
            offered = {h.flavor for h in _batching(ledgers, "probe", request, "spend_many")}
            whos = [w for w in whos if w.method == "spend" or w.flavor in offered]
            whos = usable(ledgers, request, probe, whos)
            ids = race_ids(ledgers, "batch-race")
            rounds = [ids[n : n + CHUNK] for n in range(0, len(ids), CHUNK)]
            results = race(ledgers, label, whos, rounds)
            names = ", ".join(w.name for w in whos)
            assert_one_winner(results, f"{names} released together on each batch")
            assert_linearizable(ledgers, "C1")

    @C3(SPEND_MANY)
    def test_C3_axes_is_spent_many(self, request: pytest.FixtureRequest, ledgers: Ledgers) -> None:
        """is_spent_many answers what is_spent would, before and after single and batch
        spends, on long and edge ids (duplicates in a batch included)."""
        problems: list[str] = []
        with replayable(ledgers) as axes:
            for handle in _batching(ledgers, "reads", request, "is_spent_many"):
                require_is_spent(handle)
                ids = drawn_ids(ledgers, axes, f"reads-{handle.flavor}")
                probe = [*ids, ids[0], ids[-1]]
                answers = record_batch(ledgers, handle, "is_spent_many", probe, "before")
                _compare(
                    problems, f"{handle.flavor} is_spent_many", probe, answers, [False] * len(probe)
                )
                by_single = ids[::3]
                for rid in by_single:
                    handle.spend(rid, "single")
                if callable(getattr(handle.ledger, "spend_many", None)):
                    record_batch(ledgers, handle, "spend_many", ids[1::3], "batch")
                    spent = set(by_single) | set(ids[1::3])
                else:
                    spent = set(by_single)
                single = [handle.is_spent(rid, "single") for rid in probe]
                answers = record_batch(ledgers, handle, "is_spent_many", probe, "after")
                _compare(
                    problems,
                    f"{handle.flavor} is_spent_many",
                    probe,
                    answers,
                    [r in spent for r in probe],
                )
                problems += [
                    f"{handle.flavor}: is_spent of {shown(rid)} answered {got!r}"
                    for rid, got in zip(probe, single, strict=True)
                    if got is not (rid in spent)
                ]
            assert not problems, (
                f"{len(problems)} batch read(s) disagree with single reads:\n  "
                + "\n  ".join(problems[:8])
                + "\nUsual causes: a batch read keyed differently from the write (truncated, "
                "normalized, another prefix), answers in another order than the ids asked "
                "(a set, a sorted query), a duplicate answered once. Look at is_spent_many."
            )
            assert_linearizable(ledgers, "C3")
