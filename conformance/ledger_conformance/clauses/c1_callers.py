"""C1 over every kind of caller at once, on long and edge ids.

Races elsewhere use short ids and one kind of caller at a time; here threads of this
process (sync and async instances), forked children (sync and async) and freshly spawned
interpreters (sync and async) are released together on each id, the ids drawn from the
long (100 to 1024 bytes) and edge families: a batch or async path that differs across
processes, or a key that breaks past some length, shows only when all of them meet.
"""

from __future__ import annotations

import pytest

from ..axes import CALLERS
from ..harness import Ledgers
from .c1_once import C1
from .common import assert_linearizable, assert_one_winner
from .drawn import Who, drawn_ids, race, replayable, usable

EVERY_CALLER = tuple(Who(kind, flavor) for kind, flavor in CALLERS)  # type: ignore[arg-type]
# Async callers across processes only: a sync path that writes first (it is usually the
# faster one) would hide an async path that checks, then writes.
ASYNC_ACROSS = (
    Who("thread", "async"),
    Who("fork", "async"),
    Who("fork", "async", number=1),
    Who("spawn", "async"),
)


def race_ids(ledgers: Ledgers, part: str) -> list[str]:
    """The profile's number of long and edge ids, the 1024- and 1023-byte ones always."""
    with replayable(ledgers) as axes:
        drawn = drawn_ids(ledgers, axes, part)
        always, rest = drawn[:2], drawn[2:]
        count = max(0, min(len(rest), ledgers.profile.race_ids - len(always)))
        return always + axes.rng(f"race:{part}").sample(rest, count)


class C1Callers:
    @C1()
    def test_C1_axes_every_caller(self, request: pytest.FixtureRequest, ledgers: Ledgers) -> None:
        """Threads, forked children and spawned interpreters, sync and async, released
        together on each long or edge id (half the ids; the other half: async callers
        of four processes): exactly one True per id."""
        label = ledgers.label("callers")
        probe = ledgers.open(label)
        ids = race_ids(ledgers, "callers")
        results: dict[str, list[object]] = {}
        names = []
        allowed = set(usable(ledgers, request, probe, (*EVERY_CALLER, *ASYNC_ACROSS)))
        for whos, share in ((EVERY_CALLER, ids[::2]), (ASYNC_ACROSS, ids[1::2])):
            kept = [w for w in whos if w in allowed]
            names.append(", ".join(w.name for w in kept))
            with replayable(ledgers):
                results |= race(ledgers, label, kept, [[rid] for rid in share])
        with replayable(ledgers):
            context = " / ".join(names) + " released together on each long or edge id"
            assert_one_winner(results, context)
            assert_linearizable(ledgers, "C1")
