"""Interrupted calls (C5, C10) and brand-new stores opened by several processes at once (C6).

A call can end without an answer: its task cancelled (``Task.cancel``, a ``wait_for``
timeout) or its process killed while the request is on its way. Its outcome is then
unknown to its caller, and the same call is retried. A retried plain ``spend`` may answer
``False`` (the interrupted one landed) or ``True`` (nothing landed): the per-key history
checker, with the interrupted call indeterminate, decides which answers fit. A retried
``spend_as`` under the same key must answer ``True`` either way (C10: it re-enters its own
record, or records the id now). Through the fault proxy the interruption lands at each
point between the call's requests in turn (cut 0 before its first request, cut 1 after
the first was answered, ...), and what was held is then dropped (never lands) or let on
(lands after the interruption); a store without an address gets cancels after a few
event-loop passes and kills right after a call began.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

import pytest

from ledger_core.errors import LedgerError

from ..context import Flavor, LedgerContext, Route
from ..declare import SPEND_AS
from ..faults import ProxyRouter, Toxic
from ..harness import CALL_BOUND, Handle, Ledgers, error_text
from ..history import Op
from .c6_identity import C6
from .c10_reentry import C10, new_keys
from .c45_faults import C5
from .common import (
    FORK,
    assert_linearizable,
    call,
    forked,
    in_child,
    not_exercised,
    open_flavor,
    partly,
    reply,
    require_store_id,
)

Ending = Literal["dropped", "landed"]
ENDINGS: tuple[Ending, ...] = ("dropped", "landed")
MAX_CUTS = 4  # points between a call's requests tried; a spend rarely sends more
LOOP_PASSES = (0, 1, 2, 4, 8)  # event-loop turns before a cancel, without a proxy
KILL_POINTS = (0, 2, 4)  # without a proxy: kill right after the child began this call
INTERRUPTED = "interrupted: its outcome is unknown to its caller"
NEW_STORE_IDS = 8  # ids every process spends on the brand-new store


@dataclass(frozen=True)
class Interrupted:
    """One interrupted call: when it began and when its interruption was over, and what
    it came to (None: no answer; a call that answered before the cut has ``value``)."""

    invoke_ns: int
    complete_ns: int
    answered: bool = False
    value: object = None
    error: str | None = INTERRUPTED


# -- the fault proxy: hold the call's requests, interrupt at a cut -----------------------


def _notify(router: ProxyRouter) -> None:
    with router.held_signal:
        router.held_signal.notify_all()


def _notify_on_reply(pipe: Any, router: ProxyRouter, bound: float) -> None:
    """Wake the wait for a held request when the child answers instead."""
    pipe.poll(bound)
    _notify(router)


def _reach_cut(router: ProxyRouter, done: Callable[[], bool], cut: int, bound: float) -> bool:
    """Let ``cut`` requests through, then wait for the next one to be held: True when the
    call is held there, False when it ended first."""
    for n in range(cut + 1):
        if not router.wait_held(done, bound):
            pytest.fail(f"the call neither sent a request nor finished within {bound:g} s")
        if done():
            return False
        if n < cut:
            router.let_through(1)
    return True


def _end(router: ProxyRouter, ending: Ending) -> None:
    """What was held never lands (reset first), or goes on now."""
    if ending == "dropped":
        router.set(Toxic.RESET)
    router.heal()


async def _start(fn: Callable[..., Any], args: tuple[object, ...]) -> asyncio.Task[Any]:
    return asyncio.ensure_future(fn(*args))


def _cancel_held(
    ledgers: Ledgers,
    router: ProxyRouter,
    handle: Handle,
    method: str,
    args: tuple[object, ...],
    cut: int,
    ending: Ending,
) -> Interrupted | None:
    """An async call cancelled while its request ``cut`` is held; None: it ended first."""
    loop = ledgers.runtime.loop
    bound = ledgers.profile.settle
    router.set(Toxic.HOLD)
    invoke = time.monotonic_ns()
    task = loop.run(_start(getattr(handle.ledger, method), args))
    loop.loop.call_soon_threadsafe(task.add_done_callback, lambda _: _notify(router))
    held = _reach_cut(router, task.done, cut, bound)
    if held:
        loop.loop.call_soon_threadsafe(task.cancel)
    _end(router, ending)
    loop.run(asyncio.wait([task], timeout=bound), timeout=bound + 1)
    if not task.done():
        pytest.fail(f"a cancelled {method} did not end within {bound:g} s")
    outcome = _outcome(task, invoke)
    return outcome if held or outcome.error is not None else None


def _outcome(task: asyncio.Task[Any], invoke: int) -> Interrupted:
    complete = time.monotonic_ns()
    if task.cancelled():
        return Interrupted(invoke, complete)
    exc = task.exception()
    if exc is not None:
        return Interrupted(invoke, complete, True, None, error_text(exc))
    return Interrupted(invoke, complete, True, task.result(), None)


async def _child_call(ledger: Any, pipe: Any, method: str, args: tuple[object, ...]) -> object:
    pipe.send(("ready", None))
    if not pipe.poll(CALL_BOUND) or pipe.recv() != "go":
        raise TimeoutError("the parent did not say go")
    return await call(ledger, method, *args)


def _kill_held(
    ledgers: Ledgers,
    router: ProxyRouter,
    label: str,
    method: str,
    args: tuple[object, ...],
    cut: int,
    ending: Ending,
) -> Interrupted | None:
    """A forked process (its own ledger, through the proxy) SIGKILLed while its request
    ``cut`` is held; None: the call ended first."""
    bound = ledgers.profile.settle
    ours, its = FORK.Pipe()
    ctx = LedgerContext(store=label, route=router, flavor="sync")
    body = partial(_child_call, pipe=its, method=method, args=args)
    with forked(lambda: in_child(ledgers.factory, ctx, body, its.send), name="killed") as (child,):
        status, why = reply(ours)
        assert status == "ready", f"the process to be killed could not open the store: {why}"
        router.set(Toxic.HOLD)
        invoke = time.monotonic_ns()
        ours.send("go")
        watcher = threading.Thread(target=_notify_on_reply, args=(ours, router, bound), daemon=True)
        watcher.start()
        held = _reach_cut(router, ours.poll, cut, bound)
        if held:
            os.kill(child.pid, signal.SIGKILL)
            child.join(CALL_BOUND)
        _end(router, ending)
        if held:
            return Interrupted(invoke, time.monotonic_ns())
        status, _ = reply(ours, bound)
    return None if status == "done" else Interrupted(invoke, time.monotonic_ns())


# -- without a proxy: cancel after a few loop passes, kill right after a call began ---------


async def _cancel_after(
    fn: Callable[..., Any], args: tuple[object, ...], passes: int
) -> Interrupted:
    invoke = time.monotonic_ns()
    task = asyncio.ensure_future(fn(*args))
    for _ in range(passes):
        await asyncio.sleep(0)  # a turn of the loop: the call goes on meanwhile
    task.cancel()
    await asyncio.wait([task])
    return _outcome(task, invoke)


async def _announce(ledger: Any, pipe: Any, method: str, calls: list[tuple[object, ...]]) -> None:
    for n, args in enumerate(calls):
        pipe.send(("invoke", n, time.monotonic_ns()))
        value = await call(ledger, method, *args)
        pipe.send(("answer", n, time.monotonic_ns(), value))


def _kill_after_begun(
    ledgers: Ledgers, label: str, method: str, calls: list[tuple[object, ...]], point: int
) -> list[Interrupted]:
    """A forked process makes ``calls`` one after another and is SIGKILLed as soon as it
    said call ``point`` began: what each call came to (unanswered ones interrupted)."""
    ours, its = FORK.Pipe()
    ctx = LedgerContext(store=label, flavor="sync")
    body = partial(_announce, pipe=its, method=method, calls=calls)
    began: dict[int, int] = {}
    answers: dict[int, tuple[int, object]] = {}

    def take(message: tuple[Any, ...]) -> None:
        status, n, *rest = message
        if status == "invoke":
            began[n] = rest[0]
        elif status == "answer":
            answers[n] = (rest[0], rest[1])
        elif status != "done":  # done: it made every call before the kill landed
            pytest.fail(f"the process to be killed failed before call {point}: {message}")

    with forked(lambda: in_child(ledgers.factory, ctx, body, its.send), name="killed") as (child,):
        while point not in began:
            take(reply(ours))
        os.kill(child.pid, signal.SIGKILL)
        child.join(CALL_BOUND)
        while ours.poll(0):
            take(ours.recv())
    killed = time.monotonic_ns()
    return [
        Interrupted(began[n], answers[n][0], True, answers[n][1], None)
        if n in answers
        else Interrupted(began[n], killed)
        for n in sorted(began)
    ]


# -- what the interrupted calls are tried on ------------------------------------------------


@dataclass(frozen=True)
class Calls:
    """What is interrupted: ``method`` on the store ``label``, each time on new
    arguments from ``make``, in the ``flavor`` asked for."""

    ledgers: Ledgers
    flavor: Flavor
    label: str
    method: str
    make: Callable[[], tuple[object, ...]]


Tried = Iterator[tuple[Handle, tuple[object, ...], Interrupted]]


def _routed(ledgers: Ledgers, label: str) -> bool:
    """Whether the factory puts the fault proxy in the path of this store."""
    if not getattr(ledgers.factory, "routable", True):
        return False
    with ProxyRouter() as router:
        ledgers.close_handle(ledgers.open(label, "sync", router))
        return router.used


def _open_routed(ledgers: Ledgers, label: str, flavor: Flavor, route: Route) -> Handle:
    handle = ledgers.open(label, flavor, route)
    if handle.flavor != flavor:
        not_exercised(f"the factory gave a {handle.flavor} ledger when asked for {flavor}")
    return handle


def _held(calls: Calls, request: pytest.FixtureRequest) -> Tried:
    """Each cut, each ending, through one proxy and one instance (the one to cancel; for
    a kill, the parent's own, whose proxy exists before the fork so the child's route
    finds it): a cancelled call must leave the instance working for the next."""
    ledgers, flavor, label, method = calls.ledgers, calls.flavor, calls.label, calls.method
    with ProxyRouter() as router:
        handle = _open_routed(ledgers, label, flavor, router)
        for ending in ENDINGS:
            for cut in range(MAX_CUTS):
                args = calls.make()
                if flavor == "async":
                    got = _cancel_held(ledgers, router, handle, method, args, cut, ending)
                else:
                    got = _kill_held(ledgers, router, label, method, args, cut, ending)
                if got is None:
                    break
                yield handle, args, got
            else:
                partly(request, f"a call sent more than {MAX_CUTS} requests: later cuts not tried")


def _unheld(calls: Calls) -> Tried:
    ledgers, method = calls.ledgers, calls.method
    handle = open_flavor(ledgers, calls.label, calls.flavor)
    if calls.flavor == "async":
        for passes in LOOP_PASSES:
            args = calls.make()
            fn = getattr(handle.ledger, method)
            yield handle, args, ledgers.runtime.loop.run(_cancel_after(fn, args, passes))
        return
    for point in KILL_POINTS:
        made = [calls.make() for _ in range(point + 1)]
        got = _kill_after_begun(ledgers, calls.label, method, made, point)
        yield from ((handle, args, one) for args, one in zip(made, got, strict=False))


def _interruptions(calls: Calls, request: pytest.FixtureRequest) -> Tried:
    """Every interruption of the calls this store allows, each on new arguments, with
    the instance to retry on (the cancelled one; beside a killed process, the parent's)."""
    if calls.flavor == "sync":  # a sync call is interrupted by killing its process
        opened = open_flavor(calls.ledgers, calls.label, calls.flavor)
        require_store_id(opened, "retries of a killed process")
    if _routed(calls.ledgers, calls.label):
        yield from _held(calls, request)
        return
    partly(
        request,
        "no request held mid-flight (the store has no address for the fault proxy): "
        "interrupted after a few loop passes, or right after the call began",
    )
    yield from _unheld(calls)


def _tolerant(fn: Callable[..., object], *args: object) -> object:
    """A retry on an instance whose call was interrupted may raise a LedgerError (its
    connection was reset): indeterminate, recorded as such; anything else is raised."""
    try:
        return fn(*args)
    except LedgerError as exc:
        return exc


def _record(ledgers: Ledgers, handle: Handle, request_id: str, got: Interrupted, who: str) -> None:
    op = Op(
        who,
        "spend",
        handle.key(request_id),
        got.invoke_ns,
        got.complete_ns,
        got.value if got.error is None else None,
        got.error,
    )
    ledgers.add(handle.label, request_id, op)


class Interruptions:
    @C5()
    @pytest.mark.parametrize("flavor", ["sync", "async"])
    def test_C5_interrupted_spend_retried(
        self, request: pytest.FixtureRequest, ledgers: Ledgers, flavor: Flavor
    ) -> None:
        """A spend cancelled (async) or killed with its process (sync) midway, then read
        and retried on the same instance and a new one: a retry may answer True only if
        nothing of the interrupted one landed; the history checker decides."""
        label = ledgers.label()
        healthy = open_flavor(ledgers, label, flavor)
        tried = 0
        calls = Calls(ledgers, flavor, label, "spend", lambda: tuple(ledgers.ids(1, "cut")))
        for handle, args, got in _interruptions(calls, request):
            request_id = str(args[0])
            tried += 1
            _record(ledgers, handle, request_id, got, f"interrupted-{flavor}")
            if handle.has_is_spent:
                _tolerant(handle.is_spent, request_id, "read-after")
            _tolerant(handle.spend, request_id, "retry-same-instance")
            healthy.spend(request_id, "retry-new-instance")
            if healthy.has_is_spent:
                healthy.is_spent(request_id, "read-new-instance")
        assert tried, "no call was interrupted"
        assert_linearizable(ledgers, "C5")

    @C10()
    @pytest.mark.parametrize("flavor", ["sync", "async"])
    def test_C10_interrupted_spend_as_reenters(
        self, request: pytest.FixtureRequest, ledgers: Ledgers, flavor: Flavor
    ) -> None:
        """A spend_as cancelled or killed midway, retried under the same key: True on the
        same instance and on a new one (it re-enters its own record, or records the id
        now); another key and a plain spend are refused afterwards."""
        label = ledgers.label()
        healthy = open_flavor(ledgers, label, flavor)
        if not healthy.has(SPEND_AS):
            not_exercised(f"the {flavor} variant has no spend_as")

        def make() -> tuple[object, ...]:
            return (ledgers.ids(1, "cut")[0], new_keys(1)[0])

        problems: list[str] = []
        calls = Calls(ledgers, flavor, label, "spend_as", make)
        for handle, (request_id, key), got in _interruptions(calls, request):
            what = f"{request_id!r} ({flavor}, interrupted {_when(got)})"
            if got.answered and got.error is None and got.value is not True:
                problems.append(f"{what}: the first spend_as of a fresh id answered {got.value!r}")
            again = _tolerant(handle.call, "spend_as", request_id, key)
            if not isinstance(again, LedgerError) and again is not True:
                problems.append(f"{what}: retried under the same key, answered {again!r}")
            steps = (
                ("the same key on a new instance", (request_id, key), True),
                ("another key", (request_id, new_keys(1)[0]), False),
            )
            for who, call_args, expected in steps:
                answer = healthy.call("spend_as", *call_args)
                if answer is not expected:
                    problems.append(f"{what}: {who} answered {answer!r}, not {expected}")
            if healthy.call("spend", request_id) is not False:
                problems.append(f"{what}: a plain spend afterwards did not answer False")
        assert not problems, (
            f"{len(problems)} interrupted spend_as call(s) went wrong: "
            + "; ".join(problems[:6])
            + ". Usual causes: spend_as writes the id and the key's digest in two steps (a "
            "cancel or a kill between them leaves a record no key holds), or a cancelled "
            "call leaves its reply on a pooled connection for the next call to read."
        )


def _when(got: Interrupted) -> str:
    return "after it answered" if got.answered else "midway"


# -- brand-new stores, opened by several processes at once ----------------------------------


async def _first_open(
    ledger: Any, ids: list[str], order: random.Random
) -> tuple[object, list[object]]:
    store_id = getattr(ledger, "store_id", None)
    answers: list[object] = []
    for request_id in order.sample(ids, len(ids)):  # each opener its own order
        try:
            answers.append((request_id, await call(ledger, "spend", request_id)))
        except Exception as exc:
            answers.append((request_id, error_text(exc)))
    return store_id, answers


def _opened_at_once(ledgers: Ledgers, label: str, ids: list[str], count: int) -> list[Any]:
    """``count`` forked processes, sync and async alternately, released together by a
    barrier, each opening the brand-new store ``label`` and spending ``ids``."""
    barrier = FORK.Barrier(count)
    pipes = [FORK.Pipe() for _ in range(count)]

    def child(n: int) -> None:
        flavor: Flavor = "sync" if n % 2 == 0 else "async"
        ctx = LedgerContext(store=label, flavor=flavor)
        barrier.wait(CALL_BOUND)
        order = random.Random(f"{ledgers.runtime.seed}:{label}:{n}")  # the seed replays it
        in_child(ledgers.factory, ctx, partial(_first_open, ids=ids, order=order), pipes[n][1].send)

    with forked(*(partial(child, n) for n in range(count)), name="opener"):
        return [reply(ours) for ours, _ in pipes]


def _judged(results: list[Any], ids: list[str]) -> list[str]:
    opened = [data for status, data in results if status == "done"]
    failed = [data for status, data in results if status != "done"]
    if not opened:
        return [f"no process could open the brand-new store: {failed[0]}"]
    problems: list[str] = []
    store_ids = {store_id for store_id, _ in opened}
    if len(store_ids) > 1:
        problems.append(
            f"{len(store_ids)} store_ids for one brand-new store opened by {len(results)} "
            f"processes at once ({', '.join(sorted(map(repr, store_ids)))})"
        )
    answers: dict[str, list[object]] = {request_id: [] for request_id in ids}
    for _, pairs in opened:
        for request_id, answer in pairs:
            answers[request_id].append(answer)
    for request_id, got in answers.items():
        wins = sum(1 for a in got if a is True)
        raised = [a for a in got if not isinstance(a, bool)]
        if wins > 1 or (wins == 0 and not raised and not failed):
            problems.append(f"{request_id!r}: {wins} processes got True (exactly one must)")
    return problems


class NewStoreAtOnce:
    @C6()
    def test_C6_new_store_opened_at_once(self, ledgers: Ledgers) -> None:
        """Several processes open a store label never opened before at the same moment
        (each creating it) and spend the same ids: one store_id, one True per id."""
        profile = ledgers.profile
        require_store_id(ledgers.open(ledgers.label("probe")), "one store across processes")
        problems: list[str] = []
        for n in range(profile.new_stores):
            label = ledgers.label(f"brand-new-{n}")
            ids = ledgers.ids(NEW_STORE_IDS, f"new{n}")
            problems += _judged(_opened_at_once(ledgers, label, ids, profile.processes), ids)
        assert not problems, (
            "; ".join(problems[:6]) + ". Usual causes: the store's identity (its genesis "
            "record, table or key) is created by a read then a write instead of one "
            "conditional create (INSERT ... ON CONFLICT DO NOTHING, SET NX, a put with a "
            "condition), then read back; or records keyed by an identity one racing opener "
            "then replaced."
        )
