"""What the axis-varying clause parts share: the run's draws, callers of every kind
released together, and batch calls recorded like single ones."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import pytest

from ..axes import Axes, seed_note
from ..callers import (
    UNPORTABLE,
    Caller,
    Job,
    Raised,
    Spawned,
    Step,
    forked_caller,
    portable,
    record_ops,
    release,
)
from ..context import Flavor
from ..harness import CALL_BOUND, Handle, Ledgers, error_text
from ..history import Op
from .c8_ids import EDGE_IDS
from .common import partly, run_bound


def axes_of(ledgers: Ledgers) -> Axes:
    return Axes(ledgers.runtime.seed, wide=ledgers.profile.axes_wide)


@contextmanager
def replayable(ledgers: Ledgers) -> Iterator[Axes]:
    """The run's draws; a failure inside says the seed that replays them."""
    axes = axes_of(ledgers)
    try:
        yield axes
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n[{seed_note(axes)}]") from None


def drawn_ids(ledgers: Ledgers, axes: Axes, part: str, edges: int = 24) -> list[str]:
    """Long ids (the 1024- and 1023-byte ones first) and a sample of C8's edge ids, once
    each: raw (each test spends them on a fresh store of its own)."""
    found = [*axes.long_ids(ledgers.label(part), part), *axes.edge_ids(EDGE_IDS, part, edges)]
    return list(dict.fromkeys(found))


def answer_of(value: object) -> object:
    return f"raised {value.error}" if isinstance(value, Raised) else value


# -- callers of every kind --------------------------------------------------------------


@dataclass(frozen=True)
class Who:
    """One racer: where it runs (``thread``, ``fork``, ``spawn``), its flavor, its method."""

    kind: str
    flavor: Flavor
    method: str = "spend"
    number: int = 0  # tells apart two racers of one kind

    @property
    def name(self) -> str:
        return f"{self.kind}-{self.flavor}-{self.method}-{self.number}"


def spawned_pool(ledgers: Ledgers) -> Spawned:
    runtime = ledgers.runtime
    if runtime.spawned is None:
        runtime.spawned = Spawned()
    pool: Spawned = runtime.spawned
    return pool


def in_new_interpreter(
    ledgers: Ledgers,
    process: str,
    label: str,
    flavor: Flavor,
    method: str,
    args: tuple[object, ...],
) -> tuple[object, int, int]:
    """``method(*args)`` on a new ledger of ``label`` in one of the run's spawned
    interpreters: its answer (a value, or ``Raised``) and when it was invoked and done.
    Raises ``NotOpened`` when the factory raised there, ``CallerFailed`` when it died."""
    steps = (Step(method, args),)
    job = Job(label, flavor, steps, process, portable(ledgers.factory), tuple(sys.path))
    outcome = spawned_pool(ledgers).call(job)
    ((invoke, complete),) = outcome.times
    return outcome.answers[0], invoke, complete


def job_for(ledgers: Ledgers, who: Who, label: str, steps: Sequence[Step]) -> Job:
    """The job for ``who``: a spawned interpreter is told how to rebuild the factory and
    where to import it from; a forked child has it already."""
    if who.kind != "spawn":
        return Job(label, who.flavor, tuple(steps), who.name)
    factory = portable(ledgers.factory)
    return Job(label, who.flavor, tuple(steps), who.name, factory, tuple(sys.path))


def usable(
    ledgers: Ledgers, request: pytest.FixtureRequest, probe: Handle, whos: Sequence[Who]
) -> list[Who]:
    """The racers this ledger can have: other processes only with a ``store_id`` (the
    cross-process promise), spawned interpreters only for a factory one can rebuild."""
    kept = list(whos)
    if probe.store_id is None:
        partly(request, "only this process's callers: store_id is None")
        return [w for w in kept if w.kind == "thread"]
    if any(w.kind == "spawn" for w in kept) and portable(ledgers.factory) is None:
        partly(request, f"no spawned interpreter: {UNPORTABLE}")
        kept = [w for w in kept if w.kind != "spawn"]
    return kept


def record_batch(
    ledgers: Ledgers, handle: Handle, method: str, ids: Sequence[str], process: str
) -> object:
    """``spend_many``/``is_spent_many`` through ``handle``, each id recorded as its own
    op over the batch's interval (its answer, or the batch's error: indeterminate).
    Returns the answers, or what the batch raised."""
    ops: list[Op] = []
    step = Step(method, (list(ids),))
    invoke = time.monotonic_ns()
    try:
        value: object = handle.call(method, list(ids))
        error = None
    except Exception as exc:
        value, error = exc, error_text(exc)
    done = time.monotonic_ns()
    record_ops(ops, process, handle.label, step, invoke, done, None if error else value, error)
    ledgers.adopt(handle.label, ops)
    return value


def rounds_of(who: Who, rounds: Sequence[Sequence[str]]) -> list[Step]:
    """A racer's steps: per round its batch, or its spends in order (the first gated)."""
    steps: list[Step] = []
    for chunk in rounds:
        if who.method == "spend_many":
            steps.append(Step("spend_many", (list(chunk),), gated=True))
        else:
            steps += [Step(who.method, (rid,), gated=n == 0) for n, rid in enumerate(chunk)]
    return steps


def race(
    ledgers: Ledgers, label: str, whos: Sequence[Who], rounds: Sequence[Sequence[str]]
) -> dict[str, list[object]]:
    """Every racer in ``whos`` on the store ``label``, released together on each round
    (threads of this process, forked children, spawned interpreters); every call is
    recorded in the history. Each id's answers, from every racer."""
    results: dict[str, list[object]] = {rid: [] for chunk in rounds for rid in chunk}
    local = [w for w in whos if w.kind == "thread"]
    remote = [w for w in whos if w.kind != "thread"]
    handles = {w: ledgers.open(label, w.flavor) for w in local}
    callers: list[tuple[Who, Caller]] = []
    forks: list[Caller] = []
    pool = spawned_pool(ledgers)
    spawned = iter(pool.take(sum(1 for w in remote if w.kind == "spawn")))
    lock = threading.Lock()
    try:
        for who in remote:
            if who.kind == "fork":
                caller = forked_caller(ledgers.factory, f"ledger-suite-{who.name}")
                forks.append(caller)
            else:
                caller = next(spawned)
            caller.start(job_for(ledgers, who, label, rounds_of(who, rounds)))
            callers.append((who, caller))
        barrier = threading.Barrier(len(local) + 1) if local else None

        def run_local(n: int) -> None:
            try:
                spend_rounds(local[n])
            except BaseException:
                if barrier is not None:
                    barrier.abort()  # the coordinator would wait for this racer forever
                raise

        def spend_rounds(who: Who) -> None:
            handle = handles[who]
            for chunk in rounds:
                assert barrier is not None
                barrier.wait(CALL_BOUND)
                if who.method == "spend_many":
                    answers = record_batch(ledgers, handle, "spend_many", chunk, who.name)
                    spread(results, chunk, answers, lock)
                    continue
                for rid in chunk:
                    try:
                        value: object = handle.spend(rid, who.name)
                    except Exception as exc:
                        value = exc
                    with lock:
                        results[rid].append(value)

        crashes: list[BaseException] = []
        threads = [
            threading.Thread(target=_guarded, args=(run_local, n, crashes), name=w.name)
            for n, w in enumerate(local)
        ]
        for thread in threads:
            thread.start()
        try:
            for _ in rounds:
                release([c for _, c in callers], barrier, CALL_BOUND)
        finally:
            for thread in threads:
                thread.join(run_bound(len(results)))
        if crashes:
            raise crashes[0]
        for who, caller in callers:
            outcome = caller.outcome(run_bound(len(results)))
            ledgers.adopt(label, outcome.ops)
            steps = rounds_of(who, rounds)
            for step, answer in zip(steps, outcome.answers, strict=True):
                ids = step.args[0] if step.method == "spend_many" else [step.args[0]]
                spread(results, ids, answer, lock)
    except BaseException:
        pool.close()  # a caller may be mid-job: start the pool afresh next time
        raise
    finally:
        for caller in forks:
            caller.stop()
    return results


def spread(
    results: dict[str, list[object]], ids: Sequence[str], answer: object, lock: threading.Lock
) -> None:
    """A batch's answers (or its one raise) into each id's list; a single id's answer."""
    with lock:
        if isinstance(answer, list) and len(answer) == len(ids):
            for rid, value in zip(ids, answer, strict=True):
                results[rid].append(value)
        else:
            for rid in ids:
                results[rid].append(answer)


def _guarded(target: Callable[[int], None], n: int, crashes: list[BaseException]) -> None:
    try:
        target(n)
    except BaseException as exc:  # a crashed racer fails the test, not vanishes
        crashes.append(exc)
