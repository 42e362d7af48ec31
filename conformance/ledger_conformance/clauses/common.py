"""Helpers the clause modules share: skips with a reason, outcome checks, and other
OS processes."""

from __future__ import annotations

import asyncio
import multiprocessing
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

import pytest

from ..collect import NOTE, PARTLY
from ..context import Factory, Flavor, LedgerContext, Route, enter_factory, identity_route
from ..harness import CALL_BOUND, Handle, Ledgers, describe_violations, error_text

NOT_EXERCISED = "not exercised"
NOT_APPLICABLE = "not applicable"


# Bounds on a whole contention run (each call is bounded by CALL_BOUND as well): they
# catch a run that hangs, so they scale with its ids. A fixed 300 s read a slow store's
# thorough run (512 tasks on each of 300 ids, on an emulator or a loaded machine) as a
# C1 failure when nothing was wrong but its speed.
RUN_BOUND_MIN = 300.0
PER_ID_BOUND = 5.0


def run_bound(ids: int) -> float:
    """Seconds a contention run over ``ids`` ids may take before it counts as hung."""
    return max(RUN_BOUND_MIN, ids * PER_ID_BOUND)


def wait_out(ledgers: Ledgers, since: float, wait: float | None = None) -> tuple[float, float]:
    """Sleep until ``wait`` (the profile's permanence wait) has passed since ``since``
    (monotonic): C2's timed re-reads cost only what the rest of the run did not already
    take. The seconds slept, and the seconds since ``since`` once done."""
    wait = ledgers.profile.permanence_wait if wait is None else wait
    slept = max(0.0, wait - (time.monotonic() - since))
    time.sleep(slept)  # the clause: a store that forgets or prunes later has done so
    return slept, time.monotonic() - since


def not_exercised(why: str) -> NoReturn:
    pytest.skip(f"{NOT_EXERCISED}: {why}")


def not_applicable(why: str) -> NoReturn:
    pytest.skip(f"{NOT_APPLICABLE}: {why}")


def require_store_id(handle: Handle, what: str) -> None:
    """Cross-process and proof clauses hold only for a ledger that has a store_id."""
    if handle.store_id is None:
        not_applicable(f"store_id is None, so the ledger promises {what} only in one process")


def require_is_spent(handle: Handle) -> None:
    if not handle.has_is_spent:
        not_applicable("the ledger has no is_spent (an optional method)")


def open_flavor(ledgers: Ledgers, label: str, flavor: Flavor) -> Handle:
    """Open the asked-for variant; a factory that has only the other one makes it a skip."""
    handle = ledgers.open(label, flavor)
    if handle.flavor != flavor:
        not_exercised(f"the factory gave a {handle.flavor} ledger when asked for {flavor}")
    return handle


def open_both(ledgers: Ledgers, label: str, route: Route = identity_route) -> list[Handle]:
    """A sync and an async instance on ``label`` (just one if the factory has one shape)."""
    first = ledgers.open(label, "sync", route)
    second = ledgers.open(label, "async", route)
    return [first] if first.flavor == second.flavor else [first, second]


def require_routed(router: Any, what: str = "no fault could be injected") -> None:
    """A fault test whose factory never routed through the proxy is not exercised."""
    if not router.used:
        not_exercised(f"the factory never called ctx.route, so {what}")


# Clauses whose wrong answers show up as C1/C3 violations of the history (a fault turned
# into False, two stores or two ids merged, variants that disagree): every violation is
# theirs. C1, C2 and C3 fail only for their own kind; another kind is sent to its clause
# ("see C1"), so a check-then-set race is reported under C1, once.
HISTORY_IS_THE_CHECK = frozenset({"C4", "C5", "C7", "C8", "C9"})


def assert_linearizable(ledgers: Ledgers, clause: str) -> None:
    violations = ledgers.violations()
    if clause in HISTORY_IS_THE_CHECK:
        assert not violations, describe_violations(violations)
        return
    own = [v for v in violations if v.clause == clause]
    assert not own, describe_violations(own)
    for other in sorted({v.clause for v in violations} - {clause}):
        theirs = [v for v in violations if v.clause == other]
        ledgers.refer(other, describe_violations(theirs, limit=2))


def assert_one_winner(results: dict[str, list[object]], context: str) -> None:
    """Exactly one ``True`` per id, every other answer ``False``, nothing raised."""
    problems: list[str] = []
    for request_id, answers in results.items():
        wins = sum(1 for a in answers if a is True)
        odd = [a for a in answers if not isinstance(a, bool)]
        if odd:
            shown = ", ".join(
                error_text(a) if isinstance(a, BaseException) else repr(a) for a in odd[:3]
            )
            problems.append(f"{request_id!r}: {len(odd)} answer(s) not a bool: {shown}")
        if wins != 1:
            problems.append(f"{request_id!r}: {wins} callers got True (exactly one must)")
    assert not problems, f"{context}:\n  " + "\n  ".join(problems[:10]) + _causes(results)


# The usual causes of each kind of wrong answer, and where to look: a failure names them.
CAUSES = {
    "several": "several callers got True: a read then a write outside one transaction or "
    "lock (check-then-set), a write that succeeds over an existing record (an upsert, SET "
    "without NX, a put without a condition), or one id under two keys (the variants or "
    "instances encode it differently). Look at spend's write: one conditional insert whose "
    "own result says whether it inserted",
    "none": "no caller got True: the first spend of a fresh id was refused, so an earlier "
    "id holds its key (folding, truncation, a short hash) or the write's success is misread",
    "odd": "an answer that is not a bool or a raise without any fault: spend returns exactly "
    "True or False (not 1, None or a string) and raises only LedgerErrors",
}


def _causes(results: dict[str, list[object]]) -> str:
    kinds = []
    for answers in results.values():
        wins = sum(1 for a in answers if a is True)
        if any(not isinstance(a, bool) for a in answers):
            kinds.append("odd")
        kinds.append("several" if wins > 1 else "none" if wins == 0 else "")
    found = [CAUSES[k] for k in dict.fromkeys(kinds) if k]
    return "\nUsual causes: " + "; ".join(found) + "." if found else ""


def run_threads(count: int, target: Callable[[int], None], timeout: float) -> None:
    """Run ``target(i)`` on ``count`` threads and join them, bounded; re-raise a crash."""
    crashes: list[BaseException] = []

    def guarded(i: int) -> None:
        try:
            target(i)
        except BaseException as exc:  # a crashed worker must fail the test, not vanish
            crashes.append(exc)

    threads = [threading.Thread(target=guarded, args=(i,), name=f"t{i}") for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
    alive = sum(t.is_alive() for t in threads)
    assert not alive, f"{alive} worker thread(s) still running after {timeout:g} s"
    if crashes:
        raise crashes[0]


def expect_bool(value: object, what: str) -> bool:
    assert isinstance(value, bool), (
        f"{what} returned {value!r} ({type(value).__name__}), not a bool"
    )
    return value


def collect(
    results: dict[str, list[object]], request_id: str, call: Callable[[str], object]
) -> None:
    """Append ``call(request_id)``'s answer, or what it raised, to ``results[request_id]``."""
    try:
        value = call(request_id)
    except Exception as exc:
        value = exc
    results[request_id].append(value)


def empty_results(ids: Iterable[str]) -> dict[str, list[object]]:
    return {request_id: [] for request_id in ids}


def note(request: pytest.FixtureRequest, text: str) -> None:
    """Something the report shows even when the test passes (what a wait cannot prove)."""
    request.node.user_properties.append((NOTE, text))


def partly(request: pytest.FixtureRequest, text: str) -> None:
    """A part of the test was left out: the clause is reported "partly exercised"."""
    request.node.user_properties.append((PARTLY, text))


def sample(
    request: pytest.FixtureRequest, ledgers: Ledgers, field: str, fixture: str, given: int | None
) -> int:
    """The profile's ``field`` (a sample size), or what a backend's ``fixture`` gave
    instead; a lower one is said in the report ("partly exercised")."""
    profile = ledgers.profile
    full: int = getattr(profile, field)
    count = full if given is None else given
    if count < full:
        partly(
            request,
            f"{field} lowered to {count} by the backend's {fixture} fixture "
            f"(the {profile.name} profile's is {full})",
        )
    return count


# Forked, not spawned: a child inherits the factory as it is (a closure, a test's local
# class) with nothing to pickle, as a host's pre-forked workers do.
FORK = multiprocessing.get_context("fork")


async def call(ledger: Any, method: str, *args: object) -> object:
    """``ledger.method(*args)``, awaited when the ledger is async."""
    value = getattr(ledger, method)(*args)
    return await value if asyncio.iscoroutine(value) else value


def in_child(
    factory: Factory,
    ctx: LedgerContext,
    body: Callable[[Any], Awaitable[object]],
    send: Callable[[tuple[str, object]], object],
) -> None:
    """A child process's whole life: its own ledger through ``factory``, ``body`` run on
    it, closed again; ``send`` gets ``("done", result)`` or ``("error", why)``."""

    async def run() -> object:
        ledger, cleanup = await enter_factory(factory, ctx)
        try:
            return await body(ledger)
        finally:
            await cleanup()

    try:
        send(("done", asyncio.run(run())))
    except BaseException as exc:
        send(("error", error_text(exc)))


@contextmanager
def forked(*targets: Callable[[], object], name: str) -> Iterator[list[Any]]:
    """Each target in a forked OS process (the processes are yielded); on the way out
    each is joined, and killed when it has not ended within ``CALL_BOUND``, or at once
    when the body raised (its verdict is in; a child waiting to be told to go on would
    wait out its bound)."""
    children = [
        FORK.Process(target=t, name=f"ledger-suite-{name}{i}") for i, t in enumerate(targets)
    ]
    for child in children:
        child.start()
    try:
        yield children
    except BaseException:
        for child in children:
            child.kill()
        raise
    finally:
        for child in children:
            child.join(CALL_BOUND)
            if child.is_alive():
                child.kill()
                child.join(CALL_BOUND)


def reply(pipe: Any, timeout: float = CALL_BOUND) -> tuple[str, Any]:
    """A child's next message, or an error when it sent none in time."""
    return tuple(pipe.recv()) if pipe.poll(timeout) else ("error", "no reply in time")
