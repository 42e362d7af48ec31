"""C10 re-entry: the winner's attempt key answers True again; every other attempt is refused."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from ledger_core import (
    AsyncMarkerReentry,
    AsyncMemoryLedger,
    CloseVerdict,
    InvalidRequestId,
    MarkerReentry,
    MemoryLedger,
    PendingRequest,
    ResolveVerdict,
    attempt_key,
    can_reenter,
    close_pause,
    mint,
    new_attempt_secret,
    resolve,
    resolve_async,
)
from ledger_core.reentry import winner_marker
from ledger_sqlite import SQLiteLedger
from tests.scripted import Scripted

KEY_A = "attempt-key-A-0123456789"
KEY_B = "attempt-key-B-0123456789"


class Proving(MemoryLedger):
    """The memory ledger with a store_id, so the host rules may prove (H3) in these tests."""

    store_id = "memory-proving"


def test_memory_spend_as_answers_the_winner_only() -> None:
    ledger = MemoryLedger()
    assert ledger.spend_as("r", KEY_A) is True
    assert ledger.spend_as("r", KEY_A) is True  # the winner re-enters
    assert ledger.spend_as("r", KEY_B) is False  # another attempt is refused
    assert ledger.spend("r") is False
    assert ledger.is_spent("r") is True
    assert ledger.spend("plain") is True
    assert ledger.spend_as("plain", KEY_A) is False  # a plain spend has no holder


def test_async_memory_spend_as() -> None:
    ledger = AsyncMemoryLedger()

    async def go() -> list[bool]:
        return [await ledger.spend_as("r", k) for k in (KEY_A, KEY_B, KEY_A)]

    assert asyncio.run(go()) == [True, False, True]


def test_spend_as_checks_before_any_io() -> None:
    ledger = MemoryLedger()
    for bad in ["short", "x" * 300, "tab\there-0123456789", "é" * 20, b"bytes-0123456789abc"]:
        with pytest.raises(InvalidRequestId):
            ledger.spend_as("r", bad)  # type: ignore[arg-type]
    assert ledger.is_spent("r") is False


def test_racing_attempts_one_winner_then_only_it_reenters() -> None:
    ledger = MemoryLedger()
    keys = [f"attempt-{i:02d}-0123456789abcdef" for i in range(16)]
    barrier = threading.Barrier(len(keys))
    results: dict[str, bool] = {}

    def attempt(key: str) -> None:
        barrier.wait()
        results[key] = ledger.spend_as("race", key)

    threads = [threading.Thread(target=attempt, args=(k,)) for k in keys]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [k for k, won in results.items() if won]
    assert len(winners) == 1
    assert [ledger.spend_as("race", k) for k in keys] == [k == winners[0] for k in keys]


def test_attempt_key_is_stable_and_bound_to_request_and_store() -> None:
    secret = new_attempt_secret()
    pending = PendingRequest("r", "s")
    assert attempt_key(pending, secret) == attempt_key(PendingRequest("r", "s"), secret)
    assert attempt_key(pending, secret) != attempt_key(PendingRequest("r2", "s"), secret)
    assert attempt_key(pending, secret) != attempt_key(PendingRequest("r", "t"), secret)
    assert attempt_key(pending, secret) != attempt_key(pending, new_attempt_secret())
    with pytest.raises(ValueError, match="16 bytes"):
        attempt_key(pending, "short")


def test_host_winner_reenters_after_a_crash_others_refused() -> None:
    """The crash: the winner resolved (RUN) and died before the tool finished."""
    ledger = Proving()
    pending = mint(ledger, "req-1")
    winner, other = new_attempt_secret(), new_attempt_secret()
    first = resolve(ledger, pending, approved=True, attempt_key=attempt_key(pending, winner))
    assert first.verdict is ResolveVerdict.RUN
    # ... crash; the winner's attempt restarts with the same secret:
    again = resolve(ledger, pending, approved=True, attempt_key=attempt_key(pending, winner))
    assert again.verdict is ResolveVerdict.RUN
    refused = resolve(ledger, pending, approved=True, attempt_key=attempt_key(pending, other))
    assert refused.verdict is ResolveVerdict.ALREADY_SPENT
    assert (
        resolve(ledger, pending, approved=True).verdict is ResolveVerdict.ALREADY_SPENT
    )  # no key: as today
    assert close_pause(ledger, pending).verdict is CloseVerdict.POSSIBLY_RUN


def test_host_close_proves_never_ran_and_no_key_reenters() -> None:
    ledger = Proving()
    pending = mint(ledger, "req-2")
    closure = close_pause(ledger, pending)
    assert closure.verdict is CloseVerdict.CLOSED_PROVEN
    late = resolve(
        ledger, pending, approved=True, attempt_key=attempt_key(pending, new_attempt_secret())
    )
    assert late.verdict is ResolveVerdict.CLOSED_BY_HOST


def test_host_async_reenters() -> None:
    ledger = AsyncMemoryLedger()
    pending = mint(ledger, "req-3")
    key = attempt_key(pending, new_attempt_secret())

    async def go() -> list[ResolveVerdict]:
        return [
            (await resolve_async(ledger, pending, approved=True, attempt_key=key)).verdict
            for _ in "ab"
        ]

    assert asyncio.run(go()) == [ResolveVerdict.RUN, ResolveVerdict.RUN]


def test_host_without_spend_as_behaves_as_today() -> None:
    ledger = Scripted()
    assert not can_reenter(ledger)
    pending = mint(ledger, "req-4")
    key = attempt_key(pending, new_attempt_secret())
    assert resolve(ledger, pending, approved=True, attempt_key=key).verdict is ResolveVerdict.RUN
    assert (
        resolve(ledger, pending, approved=True, attempt_key=key).verdict
        is ResolveVerdict.ALREADY_SPENT
    )
    assert [c[0] for c in ledger.calls] == ["spend", "spend", "is_marker_spent"]


def test_host_spend_as_raising_is_h2_not_a_fallback_spend() -> None:
    class Broken(MemoryLedger):
        def spend_as(self, request_id: str, attempt_key: str) -> bool:
            raise TimeoutError("lost")

    ledger = Broken()
    pending = mint(ledger, "req-5")
    out = resolve(ledger, pending, approved=True, attempt_key=KEY_A)
    assert out.verdict is ResolveVerdict.FAILED_NOT_LANDED
    assert ledger.is_spent("req-5") is False


def test_host_spend_as_answering_non_bool_is_refused() -> None:
    class Odd(MemoryLedger):
        def spend_as(self, request_id: str, attempt_key: str) -> bool:
            return 1  # type: ignore[return-value]

    out = resolve(Odd(), PendingRequest("r", None), approved=True, attempt_key=KEY_A)
    assert out.verdict is ResolveVerdict.REFUSED_INVALID


def test_marker_reentry_on_sqlite(tmp_path: Path) -> None:
    """Without backend edits: spend, then a winner marker (the documented window)."""
    raw = SQLiteLedger(tmp_path / "l.db")
    with raw:
        ledger = MarkerReentry(raw)
        assert ledger.store_id == raw.store_id
        assert ledger.spend_as("r", KEY_A) is True
        assert ledger.spend_as("r", KEY_A) is True
        assert ledger.spend_as("r", KEY_B) is False
        assert raw.is_marker_spent(winner_marker("r", KEY_A)) is True
        assert list(raw.spent_ids()) == ["r"]  # the marker is not an id
        raw.spend("plain")
        assert ledger.spend_as("plain", KEY_A) is False
        # The window: the id spent, the marker lost (a crash between the two writes).
        raw.spend("crashed")
        assert ledger.spend_as("crashed", KEY_A) is False  # refused, never run twice


def test_marker_reentry_async(tmp_path: Path) -> None:
    async def go() -> list[bool]:
        ledger = AsyncMarkerReentry(AsyncMemoryLedger())
        return [await ledger.spend_as("r", k) for k in (KEY_A, KEY_B, KEY_A)]

    assert asyncio.run(go()) == [True, False, True]


def test_marker_reentry_needs_markers() -> None:
    with pytest.raises(TypeError, match="spend_marker"):
        MarkerReentry(Scripted(has_markers=False))
