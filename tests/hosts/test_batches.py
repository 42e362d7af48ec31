"""A batch of answers is all or retryable: a ledger failure part way never burns an
approval. Every position of batches of 1 to 4 fails once, before its write lands or
after, sync and async, through PydanticAI's ``results_for`` and the Agents SDK's
``apply_answers``; the failed attempt's retry (its ``attempt_secret``) completes, and
any other attempt is refused."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from agents import Runner, RunState
from pydantic_ai import DeferredToolRequests, ToolApproved
from pydantic_ai.messages import ToolCallPart

import ledger_openai_agents as oa
import ledger_pydantic_ai as pa
from ledger_agents import ApprovalNotRecorded, BatchNeedsReentry, Decision, NotThisResume
from ledger_core import AsyncMemoryLedger, LedgerUnavailable, MemoryLedger, new_attempt_secret
from tests.hosts import oa_app

SPENDS = ("spend", "spend_as")


class Faulty:
    """A sync ledger over a MemoryLedger whose spend number ``fail_at`` (``spend`` and
    ``spend_as`` counted together, from 0) raises once: before its write ("not-landed")
    or after it ("landed"). ``reenters=False`` takes ``spend_as`` away; ``markers=False``
    the markers too (no re-entry at all)."""

    store_id = "store-F"

    def __init__(
        self, fail_at: int, mode: str, *, reenters: bool = True, markers: bool = True
    ) -> None:
        self.inner: Any = self._inner()
        self.fail_at = fail_at
        self.mode = mode
        self.spends: list[str] = []
        if not reenters:
            self.spend_as = None  # type: ignore[method-assign,assignment]
        if not markers:
            self.spend_marker = None  # type: ignore[method-assign,assignment]
            self.is_marker_spent = None  # type: ignore[method-assign,assignment]

    def _inner(self) -> Any:
        return MemoryLedger()

    def _fault(self, request_id: str) -> bool:
        self.spends.append(request_id)
        return len(self.spends) - 1 == self.fail_at

    def spend(self, request_id: str) -> Any:
        fault = self._fault(request_id)
        if fault and self.mode == "not-landed":
            raise LedgerUnavailable("injected: the write never left")
        result = self.inner.spend(request_id)
        if fault:
            raise LedgerUnavailable("injected: the answer was lost")
        return result

    def spend_as(self, request_id: str, key: str) -> Any:
        fault = self._fault(request_id)
        if fault and self.mode == "not-landed":
            raise LedgerUnavailable("injected: the write never left")
        result = self.inner.spend_as(request_id, key)
        if fault:
            raise LedgerUnavailable("injected: the answer was lost")
        return result

    def is_spent(self, request_id: str) -> Any:
        return self.inner.is_spent(request_id)

    def spend_marker(self, marker: bytes) -> Any:
        return self.inner.spend_marker(marker)

    def is_marker_spent(self, marker: bytes) -> Any:
        return self.inner.is_marker_spent(marker)


class AsyncFaulty(Faulty):
    """The same faults, from coroutines over an AsyncMemoryLedger."""

    def _inner(self) -> Any:
        return AsyncMemoryLedger()

    async def spend(self, request_id: str) -> Any:
        fault = self._fault(request_id)
        if fault and self.mode == "not-landed":
            raise LedgerUnavailable("injected: the write never left")
        result = await self.inner.spend(request_id)
        if fault:
            raise LedgerUnavailable("injected: the answer was lost")
        return result

    async def spend_as(self, request_id: str, key: str) -> Any:
        fault = self._fault(request_id)
        if fault and self.mode == "not-landed":
            raise LedgerUnavailable("injected: the write never left")
        result = await self.inner.spend_as(request_id, key)
        if fault:
            raise LedgerUnavailable("injected: the answer was lost")
        return result

    async def is_spent(self, request_id: str) -> Any:
        return await self.inner.is_spent(request_id)

    async def spend_marker(self, marker: bytes) -> Any:
        return await self.inner.spend_marker(marker)

    async def is_marker_spent(self, marker: bytes) -> Any:
        return await self.inner.is_marker_spent(marker)


class Paused:
    """One paused run of ``size`` approvals in a framework, answered by attempts."""

    def __init__(self, framework: str, flavor: str, ledger: Faulty, size: int, root: Path) -> None:
        self.framework, self.flavor, self.ledger, self.root = framework, flavor, ledger, root
        self.calls = [f"call-{n}" for n in range(1, size + 1)]
        self.records: dict[str, dict[str, object]] = {}
        self.state = ""

    async def pause(self) -> None:
        sync = self.flavor == "sync"
        if self.framework == "pydantic-ai":
            requests = _requests(len(self.calls))
            if sync:
                self.records = pa.mint_requests(self.ledger, requests, conversation_id="c")
            else:
                self.records = await pa.amint_requests(self.ledger, requests, conversation_id="c")
            return
        agent = oa_app.make_agent(self.root / "tool.log", calls=len(self.calls))
        result = await Runner.run(agent, "send")
        self.state = result.to_state().to_string()
        asked = result.interruptions
        if sync:
            self.records = oa.mint_interruptions(self.ledger, asked, conversation_id="c")
        else:
            self.records = await oa.amint_interruptions(self.ledger, asked, conversation_id="c")

    async def answer(self, secret: str | None) -> dict[str, Decision]:
        """Every call approved by one attempt (``secret``: its own, or none)."""
        answers = dict.fromkeys(self.calls, True)
        sync = self.flavor == "sync"
        ledger, records = self.ledger, self.records
        if self.framework == "pydantic-ai":
            if sync:
                out = pa.results_for(ledger, records, answers, attempt_secret=secret)
            else:
                out = await pa.aresults_for(ledger, records, answers, attempt_secret=secret)
            assert all(isinstance(a, ToolApproved) for a in out.approvals.values())
            return out.decisions
        agent = oa_app.make_agent(self.root / "tool.log", calls=len(self.calls))
        state = await RunState.from_string(agent, self.state)
        if sync:
            outcome = oa.apply_answers(ledger, state, records, answers, attempt_secret=secret)
        else:
            outcome = await oa.aapply_answers(
                ledger, state, records, answers, attempt_secret=secret
            )
        assert outcome.applied
        return outcome.decisions


CASES = [(size, at) for size in range(1, 5) for at in range(size)]


@pytest.mark.parametrize("framework", ["pydantic-ai", "openai-agents"])
@pytest.mark.parametrize("flavor", ["sync", "async"])
@pytest.mark.parametrize("mode", ["not-landed", "landed"])
@pytest.mark.parametrize(("size", "at"), CASES)
def test_a_batch_failing_part_way_is_taken_back_by_its_own_retry(
    framework: str, flavor: str, mode: str, size: int, at: int, tmp_path: Path
) -> None:
    ledger = (Faulty if flavor == "sync" else AsyncFaulty)(at, mode)
    paused = Paused(framework, flavor, ledger, size, tmp_path)

    async def go() -> None:
        await paused.pause()
        with pytest.raises(ApprovalNotRecorded) as caught:
            await paused.answer(None)  # no secret from the host: the batch makes one
        error = caught.value
        assert error.recorded == tuple(paused.calls[:at])  # request-id order
        assert isinstance(error.attempt_secret, str)
        assert error.attempt_secret not in f"{error} {error!r}"
        assert "attempt_secret=error.attempt_secret" in str(error)
        if at > 0 or mode == "landed":  # something is recorded: no other attempt takes it
            spent = len(ledger.spends)
            with pytest.raises(NotThisResume):
                await paused.answer(new_attempt_secret())
            assert len(ledger.spends) == spent + 1  # the loser stopped at its first call
        decisions = await paused.answer(error.attempt_secret)
        assert list(decisions) == paused.calls
        assert all(d.run and d.decided_here for d in decisions.values())

    asyncio.run(go())


def test_a_ledger_with_markers_only_retries_through_marker_reentry() -> None:
    ledger = Faulty(1, "not-landed", reenters=False)
    records = pa.mint_requests(ledger, _requests(3), conversation_id="c")
    with pytest.raises(ApprovalNotRecorded) as caught:
        pa.results_for(ledger, records, dict.fromkeys(records, True))
    assert caught.value.recorded == ("call-1",)
    retry = pa.results_for(
        ledger, records, dict.fromkeys(records, True), attempt_secret=caught.value.attempt_secret
    )
    assert all(d.run for d in retry.decisions.values())


def test_a_ledger_without_reentry_refuses_a_batch_of_several_before_spending() -> None:
    ledger = Faulty(-1, "not-landed", reenters=False, markers=False)
    records = pa.mint_requests(ledger, _requests(2), conversation_id="c")
    with pytest.raises(BatchNeedsReentry, match="nothing was spent"):
        pa.results_for(ledger, records, dict.fromkeys(records, True))
    assert ledger.spends == []
    one = pa.results_for(ledger, records, {"call-1": True})  # one answer: H2 covers it
    assert one.decisions["call-1"].run


def test_without_reentry_one_answer_that_did_not_land_is_answered_again() -> None:
    ledger = Faulty(0, "not-landed", reenters=False, markers=False)
    records = pa.mint_requests(ledger, _requests(1), conversation_id="c")
    with pytest.raises(ApprovalNotRecorded) as caught:
        pa.results_for(ledger, records, {"call-1": True})
    assert caught.value.attempt_secret is None  # nothing to take back
    assert pa.results_for(ledger, records, {"call-1": True}).decisions["call-1"].run


def test_racing_attempts_meet_on_the_first_call_and_the_loser_spends_nothing_more() -> None:
    ledger = Faulty(-1, "not-landed")
    records = pa.mint_requests(ledger, _requests(4), conversation_id="c")
    answers = {"call-4": True, "call-2": False, "call-1": True, "call-3": True}
    first = pa.results_for(ledger, records, answers)
    assert list(first.decisions) == list(answers)  # the host's order, spent in id order
    assert ledger.spends == [f"pydantic-ai/c/call-{n}" for n in range(1, 5)]
    with pytest.raises(NotThisResume, match="already answered"):
        pa.results_for(ledger, records, answers)
    assert len(ledger.spends) == 5


def _requests(size: int) -> DeferredToolRequests:
    calls = [ToolCallPart("transfer", {}, tool_call_id=f"call-{n}") for n in range(1, size + 1)]
    return DeferredToolRequests(approvals=calls)
