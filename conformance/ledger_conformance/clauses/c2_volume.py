"""C2 at volume: many distinct ids spent, then every one read back.

Catches a store that drops old entries once it holds enough (a capped collection, an LRU
cache). Not recorded in the history (it would make the checker the slowest part); the
ids are re-read at once, after the restart hook, and at the run's end.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest

from ..harness import Handle, Ledgers, error_text
from .c2_permanent import C2
from .common import not_exercised, note, partly, sample, wait_out
from .restart import run_restart, wait_until_serving

HANDLES = 4  # instances the volume is spread over (a per-instance cache must not help)


def _run(
    handle_for: Callable[[int], Handle], method: str, ids: list[str], workers: int
) -> list[object]:
    """``method`` on every id, ``workers`` at a time; each answer or what it raised, in order."""

    def one(index: int) -> object:
        try:
            return handle_for(index).call(method, ids[index])
        except Exception as exc:
            return exc

    with ThreadPoolExecutor(workers, thread_name_prefix="ledger-volume") as pool:
        return list(pool.map(one, range(len(ids)), chunksize=64))


def spend_all(handle: Handle, ids: list[str], workers: int) -> list[str]:
    """Spend every (fresh) id: what went wrong, one line per id (empty when all were True)."""
    answers = _run(lambda _: handle, "spend", ids, workers)
    return [
        error_text(a) if isinstance(a, BaseException) else f"{i!r} -> {a!r}"
        for i, a in zip(ids, answers, strict=True)
        if a is not True
    ]


def _lost(handle: Handle, ids: list[str], workers: int) -> tuple[list[int], list[str]]:
    """Indexes (in spend order) of ids that no longer read as spent, and any errors."""
    method = "is_spent" if handle.has_is_spent else "spend"
    expected = handle.has_is_spent  # is_spent must answer True; a second spend False
    answers = _run(lambda _: handle, method, ids, workers)
    errors = [error_text(a) for a in answers if isinstance(a, BaseException)]
    lost = [
        i for i, a in enumerate(answers) if not isinstance(a, BaseException) and a is not expected
    ]
    return lost, errors


def _describe_lost(lost: list[int], total: int, when: str) -> str:
    first, last = lost[0], lost[-1]
    oldest = (
        " (the oldest ones: a size cap or eviction)" if first == 0 and last == len(lost) - 1 else ""
    )
    return (
        f"{len(lost)} of {total} spent ids lost {when}{oldest}; lost ids are spend #{first}"
        f"..#{last} in spend order"
    )


class C2Volume:
    @pytest.fixture
    def ledger_volume(self) -> int | None:
        """How many ids the volume clause spends; ``None`` takes the profile's number. A
        backend's test class may lower it (say why in a comment): the report says so."""
        return None

    @C2()
    def test_C2_volume(
        self,
        request: pytest.FixtureRequest,
        ledgers: Ledgers,
        ledger_volume: int | None,
        ledger_restart: Callable[[], object] | None,
    ) -> None:
        profile = ledgers.profile
        count = sample(request, ledgers, "volume_ids", "ledger_volume", ledger_volume)
        label = ledgers.label("volume")
        handles = [ledgers.open(label) for _ in range(HANDLES)]
        seen = ledgers.runtime.store_ids.setdefault(ledgers.suite_key, [])
        seen.append(("at open", handles[0].store_id))
        ids = ledgers.ids(count, "vol")
        workers = profile.volume_workers
        answers = _run(lambda i: handles[i % HANDLES], "spend", ids, workers)
        errors = [error_text(a) for a in answers if isinstance(a, BaseException)]
        assert not errors, f"{len(errors)} of {count} spends raised without any fault: {errors[0]}"
        refused = [i for i, a in enumerate(answers) if a is not True]
        assert not refused, (
            f"{len(refused)} of {count} fresh ids did not answer True to their first spend "
            f"(first: {ids[refused[0]]!r} -> {answers[refused[0]]!r})"
        )
        seen += [
            (f"after {count} spends (instance {i})", h.store_id) for i, h in enumerate(handles)
        ]
        problems: list[str] = []
        lost, errors = _lost(ledgers.open(label), ids, workers)
        assert not errors, f"{len(errors)} of {count} reads raised without any fault: {errors[0]}"
        if lost:
            problems.append(_describe_lost(lost, count, "read back through a fresh instance"))
        if ledger_restart is None:
            partly(request, "not re-read after a restart: no ledger_restart hook")
        else:
            wait_until_serving(
                ledgers, label, ids[0], run_restart(ledgers, ledger_restart), request
            )
            restarted = ledgers.open(label)
            seen += [("after the restart (an old instance)", handles[0].store_id)]
            seen += [("after the restart (a new instance)", restarted.store_id)]
            lost, errors = _lost(restarted, ids, workers)
            assert not errors, f"{len(errors)} reads raised after the restart: {errors[0]}"
            if lost:
                problems.append(_describe_lost(lost, count, "after a server restart"))
        assert not problems, "; ".join(problems)
        ledgers.runtime.volume[ledgers.suite_key] = (label, ids, time.monotonic())

    @C2()
    @pytest.mark.ledger_final
    def test_C2_volume_after_waiting(
        self, request: pytest.FixtureRequest, ledgers: Ledgers
    ) -> None:
        """The same ids once more at the run's end, at least the profile's wait after the
        clause above: a store that prunes later (a job that trims to a size, an eviction
        that runs when traffic stops) kept them all when they were first read back."""
        found = ledgers.runtime.volume.get(ledgers.suite_key)
        if found is None:
            not_exercised(
                "C2 volume did not pass earlier in this run (deselected, or failed and "
                "reported there), so there is no volume to read again"
            )
        label, ids, since = found
        _, waited = wait_out(ledgers, since)
        note(request, f"{len(ids)} ids re-read {waited:.1f} s after they were first read back")
        lost, errors = _lost(ledgers.open(label), ids, ledgers.profile.volume_workers)
        assert not errors, (
            f"{len(errors)} of {len(ids)} reads raised without any fault: {errors[0]}"
        )
        assert not lost, _describe_lost(lost, len(ids), f"{waited:.1f} s after they were read back")
