"""C10 re-entry (optional capability, detected by ``spend_as``): the attempt that won can
prove it again, and no other attempt ever can.

``spend_as(id, key)`` answers ``True`` when this call recorded the id or the same key
recorded it before; ``False`` to any other key and to an id recorded by a plain
``spend``; exactly one key ever wins an id, however many race; invalid keys are refused
before any I/O; and under faults a ``True`` is always backed by the key's own record.
A ledger without ``spend_as`` is "not applicable": re-entry is optional.
"""

from __future__ import annotations

import concurrent.futures
import secrets
import threading
from functools import partial
from typing import Any

import pytest

from ledger_core.errors import InvalidRequestId, LedgerError
from ledger_core.ids import MAX_ID_BYTES, MAX_KEY_CHARS, MIN_KEY_CHARS

from ..context import LedgerContext
from ..declare import ROUTABLE, SPEND_AS, declare
from ..faults import ProxyRouter, Toxic
from ..harness import CALL_BOUND, Handle, Ledgers, error_text
from .common import (
    FORK,
    call,
    expect_bool,
    forked,
    in_child,
    open_both,
    partly,
    reply,
    require_routed,
    run_bound,
    run_threads,
)

C10 = declare(
    "C10", "re-entry (spend_as): the winning key re-enters, no other key ever does", SPEND_AS
)

WORKERS = 16  # threads (each with its own key) released together on each id
BAD_KEYS: tuple[object, ...] = (
    "",
    "short",
    "k" * (MIN_KEY_CHARS - 1),
    "k" * (MAX_KEY_CHARS + 1),
    "clé-" + "k" * 20,  # not ASCII
    "k" * 20 + "\n",  # not printable
    "tab\tkey-0123456789",
    b"bytes-key-0123456789",
    None,
    12345678901234567890,
)
BAD_IDS: tuple[object, ...] = ("", "w" * (MAX_ID_BYTES + 1), b"abc", None, "\ud800")


def new_keys(count: int) -> list[str]:
    """``count`` distinct valid attempt keys (32 printable ASCII characters)."""
    return [f"attempt-{secrets.token_hex(12)}" for _ in range(count)]


def reentrant(ledgers: Ledgers, label: str, request: pytest.FixtureRequest) -> list[Handle]:
    """Every variant on ``label`` that offers ``spend_as`` (a variant without it: partly)."""
    handles = open_both(ledgers, label)
    offered = [h for h in handles if h.has(SPEND_AS)]
    for handle in handles:
        if handle not in offered:
            partly(request, f"the {handle.flavor} variant has no spend_as (the other one has)")
    return offered


def spend_as(handle: Handle, request_id: object, key: object) -> object:
    return handle.call("spend_as", request_id, key)


async def _child(ledger: Any, calls: list[tuple[str, str]]) -> list[object]:
    """Another OS process, its ledger opened anew: ``spend_as`` for each pair."""
    return [await call(ledger, "spend_as", request_id, key) for request_id, key in calls]


def _in_another_process(ledgers: Ledgers, label: str, calls: list[tuple[str, str]]) -> list[Any]:
    ours, its = FORK.Pipe()
    body = partial(_child, calls=calls)
    ctx = LedgerContext(store=label)
    with forked(lambda: in_child(ledgers.factory, ctx, body, its.send), name="reentry"):
        status, answers = reply(ours, run_bound(len(calls)))
    assert status == "done", f"the other process failed: {answers}"
    return list(answers)


class C10Reentry:
    @C10()
    def test_C10_same_key_reenters_other_keys_refused(
        self, request: pytest.FixtureRequest, ledgers: Ledgers
    ) -> None:
        """The same key re-enters (same instance, a new one, another process); another
        key is refused, and so is a plain spend."""
        label = ledgers.label()
        problems: list[str] = []
        pairs: list[tuple[str, str, str]] = []  # (id, its key, another key)
        for handle in reentrant(ledgers, label, request):
            fresh = ledgers.open(label, handle.flavor)
            for request_id in ledgers.ids(5, handle.flavor):
                key, other = new_keys(2)
                pairs.append((request_id, key, other))
                steps = [
                    (handle, key, True, "the first spend_as"),
                    (handle, key, True, "the same key again"),
                    (fresh, key, True, "the same key through a new instance"),
                    (handle, other, False, "another key"),
                    (fresh, other, False, "another key through a new instance"),
                ]
                for who, attempt, expected, what in steps:
                    answer = expect_bool(spend_as(who, request_id, attempt), "spend_as")
                    if answer is not expected:
                        problems.append(
                            f"{handle.flavor}: {what} on {request_id!r} answered {answer}, "
                            f"not {expected}"
                        )
                if handle.call("spend", request_id) is not False:
                    problems.append(f"{handle.flavor}: a plain spend of {request_id!r} won")
                if handle.has_is_spent and handle.call("is_spent", request_id) is not True:
                    problems.append(f"{handle.flavor}: {request_id!r} reads unspent")
        assert not problems, "spend_as: " + "\n  ".join(problems[:10])
        if ledgers.open(label).store_id is None:
            partly(request, "not re-entered from another process: store_id is None")
            return
        calls = [(rid, k) for rid, key, other in pairs for k in (key, other)]
        answers = _in_another_process(ledgers, label, calls)
        wrong = [
            f"{rid!r} under {'its own' if n % 2 == 0 else 'another'} key answered {answer!r}"
            for n, ((rid, _), answer) in enumerate(zip(calls, answers, strict=True))
            if answer is not (n % 2 == 0)
        ]
        assert not wrong, "in another process: " + "; ".join(wrong[:5])

    @C10()
    def test_C10_plain_spend_then_spend_as_refused(
        self, request: pytest.FixtureRequest, ledgers: Ledgers
    ) -> None:
        """An id recorded by a plain ``spend`` (or a host's close) has no holder: no key
        re-enters it."""
        label = ledgers.label()
        problems: list[str] = []
        for handle in reentrant(ledgers, label, request):
            for request_id in ledgers.ids(5, handle.flavor):
                assert expect_bool(handle.call("spend", request_id), "spend") is True
                for key in new_keys(2):
                    if expect_bool(spend_as(handle, request_id, key), "spend_as") is not False:
                        problems.append(
                            f"{handle.flavor}: spend_as({request_id!r}, a key) answered True "
                            "for an id a plain spend recorded"
                        )
        assert not problems, "\n  ".join(problems[:10])

    @C10()
    def test_C10_spend_as_then_plain_spend_refused(
        self, request: pytest.FixtureRequest, ledgers: Ledgers
    ) -> None:
        label = ledgers.label()
        problems: list[str] = []
        for handle in reentrant(ledgers, label, request):
            for request_id in ledgers.ids(5, handle.flavor):
                key, other = new_keys(2)
                assert expect_bool(spend_as(handle, request_id, key), "spend_as") is True
                if expect_bool(handle.call("spend", request_id), "spend") is not False:
                    problems.append(f"{handle.flavor}: a plain spend won {request_id!r} again")
                if spend_as(handle, request_id, key) is not True:
                    problems.append(
                        f"{handle.flavor}: after a refused plain spend, the holder's key no "
                        f"longer re-enters {request_id!r}"
                    )
                if spend_as(handle, request_id, other) is not False:
                    problems.append(f"{handle.flavor}: another key entered {request_id!r}")
        assert not problems, "\n  ".join(problems[:10])

    @C10()
    def test_C10_distinct_keys_race_one_wins(
        self, request: pytest.FixtureRequest, ledgers: Ledgers
    ) -> None:
        """Many workers, each with its own key, released at once on each id: exactly one
        key gets True; afterwards that key re-enters and every other key is refused."""
        label = ledgers.label()
        handles = reentrant(ledgers, label, request)
        handles += [ledgers.open(label, h.flavor) for h in handles]  # more instances
        ids = ledgers.ids(ledgers.profile.mixed_ids)
        keys = new_keys(WORKERS)
        answers: dict[str, list[object]] = {request_id: [None] * WORKERS for request_id in ids}
        barrier = threading.Barrier(WORKERS)

        def worker(i: int) -> None:
            handle = handles[i % len(handles)]
            for request_id in ids:
                barrier.wait(CALL_BOUND)
                try:
                    answers[request_id][i] = spend_as(handle, request_id, keys[i])
                except Exception as exc:
                    answers[request_id][i] = exc

        run_threads(WORKERS, worker, run_bound(len(ids)))
        problems: list[str] = []
        for request_id, got in answers.items():
            odd = [a for a in got if not isinstance(a, bool)]
            if odd:
                shown = error_text(odd[0]) if isinstance(odd[0], BaseException) else repr(odd[0])
                problems.append(f"{request_id!r}: {len(odd)} answer(s) not a bool: {shown}")
            winners = [i for i, a in enumerate(got) if a is True]
            if len(winners) != 1:
                problems.append(f"{request_id!r}: {len(winners)} keys got True (exactly one must)")
                continue
            won, lost = winners[0], (winners[0] + 1) % WORKERS
            checker = handles[0]
            if spend_as(checker, request_id, keys[won]) is not True:
                problems.append(f"{request_id!r}: the winning key does not re-enter")
            if spend_as(checker, request_id, keys[lost]) is not False:
                problems.append(f"{request_id!r}: a losing key entered afterwards")
        assert not problems, f"{WORKERS} keys racing on each of {len(ids)} ids:\n  " + "\n  ".join(
            problems[:10]
        )

    @C10()
    def test_C10_invalid_keys_refused_before_any_io(
        self, request: pytest.FixtureRequest, ledgers: Ledgers
    ) -> None:
        """Bad keys and bad ids raise ``InvalidRequestId`` at once, even with the store
        behind a black hole (a call that did I/O first would hang, then raise something
        else), and record nothing."""
        label = ledgers.label()
        fresh = ledgers.ids(1, "fresh")[0]
        problems: list[str] = []
        with ProxyRouter() as router:
            handles = [h for h in open_both(ledgers, label, router) if h.has(SPEND_AS)]
            if router.used and getattr(ledgers.factory, "routable", True):
                for handle in handles:  # warm the connections, then cut the store off
                    spend_as(handle, ledgers.ids(1, "warm")[0], new_keys(1)[0])
                router.set(Toxic.BLACKHOLE)
            else:
                partly(
                    request, "I/O not ruled out: the factory routes no address through ctx.route"
                )
            (good,) = new_keys(1)
            calls = [(fresh, key) for key in BAD_KEYS] + [(rid, good) for rid in BAD_IDS]
            futures: list[tuple[Handle, object, object, concurrent.futures.Future[object]]] = []
            for handle in handles:
                for request_id, key in calls:
                    future = ledgers.executor.submit(spend_as, handle, request_id, key)
                    futures.append((handle, request_id, key, future))
            done, _ = concurrent.futures.wait([f for *_, f in futures], CALL_BOUND)
            router.heal()
            router.reset_connections()
            for handle, request_id, key, future in futures:
                what = f"{handle.flavor}: spend_as({_short(request_id)}, {_short(key)})"
                if future not in done:
                    problems.append(f"{what} did not return at once: it did I/O first")
                elif not isinstance(future.exception(), InvalidRequestId):
                    got = future.exception()
                    shown = error_text(got) if got is not None else repr(future.result())
                    problems.append(f"{what} gave {shown}, not InvalidRequestId")
        assert not problems, "invalid input must be refused before any I/O:\n  " + "\n  ".join(
            problems[:10]
        )
        healthy = ledgers.open(label)
        assert spend_as(healthy, fresh, new_keys(1)[0]) is True, (
            f"refused calls recorded {fresh!r} (a fresh key could not spend it)"
        )

    @C10(ROUTABLE)
    @pytest.mark.parametrize("toxic", ["drop_replies", "reset_after_request", "reset"])
    def test_C10_faults_never_a_wrong_answer(
        self, request: pytest.FixtureRequest, ledgers: Ledgers, toxic: str
    ) -> None:
        """Under C4/C5 faults, spend_as may raise, but a True is always backed by the
        key's own record, a False is always another holder's, and one key holds an id."""
        label = ledgers.label()
        count = ledgers.profile.fault_ids
        tried: dict[str, list[tuple[str, object]]] = {}  # id -> (key, answer) under the fault
        with ProxyRouter() as router:
            handles = [h for h in open_both(ledgers, label, router) if h.has(SPEND_AS)]
            require_routed(router)
            setup = handles[0]
            plain, held, fresh = (ledgers.ids(count, tag) for tag in ("plain", "held", "fresh"))
            owner = dict(zip(held, new_keys(count), strict=True))
            for request_id in plain:
                assert setup.call("spend", request_id) is True
            for request_id in held:
                assert spend_as(setup, request_id, owner[request_id]) is True
            router.set(Toxic(toxic))
            jobs: list[tuple[str, str, concurrent.futures.Future[object]]] = []
            for handle in handles:
                work = [(rid, new_keys(1)[0]) for rid in plain]
                work += [(rid, key) for rid in held for key in (owner[rid], new_keys(1)[0])]
                work += [(rid, new_keys(1)[0]) for rid in fresh]  # every variant, its own key
                for request_id, key in work:
                    future = ledgers.executor.submit(spend_as, handle, request_id, key)
                    jobs.append((request_id, key, future))
            _, pending = concurrent.futures.wait([f for *_, f in jobs], ledgers.profile.watchdog)
            router.heal()
            router.reset_connections()
            _, pending = concurrent.futures.wait(pending, ledgers.profile.settle)
        assert not pending, f"{len(pending)} spend_as call(s) still running after healing"
        problems: list[str] = []
        for request_id, key, future in jobs:
            exc = future.exception()
            if exc is not None:
                if not isinstance(exc, LedgerError):
                    problems.append(f"spend_as({request_id!r}) raised {error_text(exc)}")
                continue
            tried.setdefault(request_id, []).append((key, future.result()))
        healthy = ledgers.open(label)  # straight to the store
        for request_id, answers in tried.items():
            problems += _wrong_answers(healthy, request_id, answers, plain, owner)
        assert not problems, f"under {toxic}:\n  " + "\n  ".join(problems[:10])


def _wrong_answers(
    healthy: Handle,
    request_id: str,
    answers: list[tuple[str, object]],
    plain: list[str],
    owner: dict[str, str],
) -> list[str]:
    """What was wrong in the answers given for ``request_id`` under the fault."""
    if request_id in plain:
        holders: set[str] = set()
    elif request_id in owner:
        holders = {owner[request_id]}
    elif healthy.has_is_spent and healthy.call("is_spent", request_id) is not True:
        holders = set()  # fresh, and nobody recorded it: every answer was a guess
        if any(answer is False for _, answer in answers):
            return [f"{request_id!r}: answered False, yet nobody recorded it"]
    else:  # fresh and recorded: who holds it (a key re-enters only its own record)
        holders = {k for k, _ in answers if spend_as(healthy, request_id, k) is True}
        if len(holders) > 1:
            return [f"{request_id!r}: {len(holders)} keys hold it"]
    wrong: list[str] = []
    for key, answer in answers:
        if not isinstance(answer, bool):
            wrong.append(f"{request_id!r}: answered {answer!r}, not a bool")
        elif answer and key not in holders:
            wrong.append(f"{request_id!r}: a key that holds no record of it got True")
        elif not answer and key in holders:
            wrong.append(f"{request_id!r}: the key that holds it got False")
    return wrong


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 24 else f"{text[:16]}...({len(text)} chars)"


def _twin_keys() -> list[tuple[str, str]]:
    """(holder, twin) pairs of valid keys that differ only after a long shared prefix, or
    only in their last character at full length: what a key column that truncates (at 32,
    64, 128 or 255 characters) or a prefix index confuses."""
    pairs: list[tuple[str, str]] = []
    for shared in (32, 64, 128, 200, MAX_KEY_CHARS - 1):
        prefix = (secrets.token_hex(MAX_KEY_CHARS) + "-")[:shared]
        pairs.append((prefix + "a", prefix + "b"))
    return pairs


class C10SharedPrefix:
    @C10()
    def test_C10_keys_sharing_a_long_prefix(
        self, request: pytest.FixtureRequest, ledgers: Ledgers
    ) -> None:
        """A key that shares all but its last character with the holder's is another key:
        refused on an id the holder spent, and the holder still re-enters."""
        problems: list[str] = []
        for handle in reentrant(ledgers, ledgers.label(), request):
            twins = _twin_keys()
            for (holder, twin), request_id in zip(
                twins, ledgers.ids(len(twins), handle.flavor), strict=True
            ):
                steps = (
                    (holder, True, "the holder"),
                    (twin, False, f"a key sharing its first {len(twin) - 1} characters"),
                    (holder, True, "the holder again"),
                )
                for key, expected, who in steps:
                    answer = expect_bool(spend_as(handle, request_id, key), "spend_as")
                    if answer is not expected:
                        problems.append(
                            f"{handle.flavor}: {who} answered {answer} on {request_id!r}"
                        )
                        break
        assert not problems, (
            "; ".join(problems[:6]) + ". Usual causes: an attempt-key column that truncates "
            "(VARCHAR(64), a fixed-width key) or a comparison of a prefix; store the key's "
            "digest (ledger_core.reentry.attempt_digest) and compare it whole."
        )
