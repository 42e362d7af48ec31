"""C3 (and C2) across instances of every kind, on long and edge ids.

A forked child inherits its parent's imports: a key derived from a secret drawn at
import, a cache, a seed. A freshly spawned interpreter draws its own, so reads and spends
between the parent and a spawned interpreter (sync and async), and through a new
instance in this process, show a store that is right only for forked children. The ids
are long (up to 1024 bytes) and edge ids, never re-read across processes elsewhere.
"""

from __future__ import annotations

import pytest

from ..callers import Step
from ..harness import Ledgers
from .c1_callers import race_ids
from .c3_reads import C3
from .c8_ids import shown
from .common import assert_linearizable, require_is_spent, require_store_id
from .drawn import Who, answer_of, job_for, replayable, spawned_pool, usable

SPAWNED = (Who("spawn", "sync"), Who("spawn", "async"))


def _steps(theirs: list[str], mine: list[str]) -> tuple[Step, ...]:
    """Read the parent's ids (unspent), wait for its spends, read them again, spend and
    read its own."""
    before = [Step("is_spent", (rid,)) for rid in theirs]
    after = [Step("is_spent", (rid,), gated=n == 0) for n, rid in enumerate(theirs)]
    spends = [Step("spend", (rid,)) for rid in mine]
    reads = [Step("is_spent", (rid,)) for rid in mine]
    return (*before, *after, *spends, *reads)


class C3Interpreters:
    @C3()
    def test_C3_axes_every_instance(self, request: pytest.FixtureRequest, ledgers: Ledgers) -> None:
        """Spends of long and edge ids read by the same instance, a new one in this
        process and spawned interpreters (sync and async), and the other way round."""
        label = ledgers.label("instances")
        parent = ledgers.open(label)
        require_store_id(parent, "reads that see every spend")
        require_is_spent(parent)
        whos = [w for w in usable(ledgers, request, parent, SPAWNED) if w.kind == "spawn"]
        ids = race_ids(ledgers, "instances")
        half = len(ids) // (2 * max(1, len(whos)))
        shares = [
            (ids[2 * n * half : (2 * n + 1) * half], ids[(2 * n + 1) * half : (2 * n + 2) * half])
            for n in range(len(whos))
        ]
        problems: list[str] = []
        for rid in ids:  # a cache of any kind now holds "not spent"
            if parent.is_spent(rid, "parent") is not False:
                problems.append(f"{shown(rid)} read spent before any spend")
        callers = spawned_pool(ledgers).take(len(whos))
        try:
            for who, caller, (theirs, mine) in zip(whos, callers, shares, strict=True):
                caller.start(job_for(ledgers, who, label, _steps(theirs, mine)))
            for caller in callers:
                caller.ready()
            for theirs, _ in shares:
                for rid in theirs:
                    if parent.spend(rid, "parent") is not True:
                        problems.append(f"the parent's first spend of {shown(rid)} was not True")
            for caller in callers:
                caller.go()
            outcomes = [caller.outcome() for caller in callers]
        except BaseException:
            spawned_pool(ledgers).close()
            raise
        fresh = ledgers.open(label)
        if not whos:  # no spawned interpreter: this process spends, a new instance reads
            problems += [
                f"the first spend of {shown(rid)}" for rid in ids if parent.spend(rid) is not True
            ]
            problems += [
                f"a new instance read {shown(rid)} as unspent"
                for rid in ids
                if fresh.is_spent(rid, "parent-new") is not True
            ]
        for who, outcome, (theirs, mine) in zip(whos, outcomes, shares, strict=True):
            ledgers.adopt(label, outcome.ops)
            n = len(theirs)
            said = [answer_of(a) for a in outcome.answers]
            checks = [
                (theirs, said[:n], False, "read before the parent's spend"),
                (theirs, said[n : 2 * n], True, "read after the parent's spend"),
                (mine, said[2 * n : 2 * n + len(mine)], True, "first spend"),
                (mine, said[2 * n + len(mine) :], True, "read after its own spend"),
            ]
            for rids, answers, expected, what in checks:
                problems += [
                    f"a {who.name} interpreter's {what} of {shown(rid)}: {answer!r}"
                    for rid, answer in zip(rids, answers, strict=True)
                    if answer is not expected
                ]
            for name, handle in (("its old instance", parent), ("a new instance", fresh)):
                problems += [
                    f"the parent ({name}) read {shown(rid)}, spent by a {who.name} "
                    "interpreter, as unspent"
                    for rid in mine
                    if handle.is_spent(rid, f"parent-{name}") is not True
                ]
            problems += [
                f"a new instance spent {shown(rid)} again"
                for rid in [*theirs, *mine]
                if fresh.spend(rid, "parent-new") is not False
            ]
        with replayable(ledgers):
            assert not problems, (
                f"{len(problems)} read(s) across instances wrong: "
                + "; ".join(problems[:6])
                + ". Usual causes: a key or cache derived from something each interpreter "
                "draws anew (a secret or salt made at import, hash() of a str, a random "
                "seed) that forked children inherit and a new interpreter does not; a "
                "per-process cache of answers. Look at how keys are built and at is_spent."
            )
            assert_linearizable(ledgers, "C3")
