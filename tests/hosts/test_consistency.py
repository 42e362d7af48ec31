"""One behaviour across frameworks: no question that cannot count (a reused thread or
conversation id with the same tool call id is refused, not asked), the same refusal of an
empty answer mapping, LangGraph's answer read before LangGraph sees it, its H5 re-ask with
a reason, and a losing LangGraph resume told apart from the winner."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from agents import Runner, RunState
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command
from pydantic_ai import DeferredToolResults, ToolDenied
from pydantic_ai.messages import ModelMessagesTypeAdapter

from ledger_agents import DECIDED_BEFORE, InvalidAnswer, NotThisResume, decide_all
from ledger_core import AsyncMemoryLedger, MemoryLedger, mint, new_attempt_secret
from ledger_langgraph import PAST_THE_PAUSE, LedgerGate, ThreadNotPaused
from ledger_openai_agents import aapply_answers
from ledger_pydantic_ai import results_for
from ledger_sqlite import AsyncSQLiteLedger, SQLiteLedger
from tests.hosts import lg_app, oa_app, pa_app
from tests.hosts.common import ALREADY, in_processes, lines

# A reused thread or conversation id with the same tool call id -------------------------


def test_langgraph_refuses_a_reused_request_without_asking(tmp_path: Path) -> None:
    with SQLiteLedger(tmp_path / "l.db") as ledger:
        graph = lg_app.build(ledger, InMemorySaver(), tmp_path / "tool.log")
        graph.invoke({"amount": 1}, lg_app.config())
        assert graph.invoke(Command(resume=True), lg_app.config())["result"] == "sent"
        again = graph.invoke({"amount": 2}, lg_app.config())  # same thread, same call id
    assert "__interrupt__" not in again  # no question that could never count
    assert again["ledger_outcome"]["message"] == DECIDED_BEFORE
    assert "crashed" not in DECIDED_BEFORE
    assert lines(tmp_path / "tool.log") == ["start", "done"]


def test_an_async_langgraph_gate_checks_before_asking_too(tmp_path: Path) -> None:
    async def go() -> dict[str, Any]:
        ledger = AsyncMemoryLedger()
        graph = lg_app.build(ledger, InMemorySaver(), tmp_path / "tool.log")
        await graph.ainvoke({"amount": 1}, lg_app.config())
        await graph.ainvoke(Command(resume=False), lg_app.config())  # a denial is spent too
        return dict(await graph.ainvoke({"amount": 2}, lg_app.config()))

    again = asyncio.run(go())
    assert "__interrupt__" not in again
    assert again["ledger_outcome"]["message"] == DECIDED_BEFORE
    assert lines(tmp_path / "tool.log") == []


def _pa_run(tmp_path: Path, saved: dict[str, Any], results: DeferredToolResults) -> str:
    history = ModelMessagesTypeAdapter.validate_python(saved["history"])
    agent = pa_app.make_agent(tmp_path / "tool.log")
    return str(agent.run_sync(message_history=history, deferred_tool_results=results).output)


@pytest.mark.parametrize("answers", [{}, {"call-1": True}])
def test_pydantic_ai_marks_a_reused_request_and_refuses_it(
    tmp_path: Path, answers: dict[str, bool]
) -> None:
    with SQLiteLedger(tmp_path / "ledger.db") as ledger:
        saved = pa_app.pause(tmp_path, ledger)
        assert _pa_run(tmp_path, saved, results_for(ledger, saved["ledger"], {"call-1": True}))
        reused = pa_app.pause(tmp_path, ledger)  # same conversation id, same tool call id
        assert reused["ledger"]["call-1"]["decided"] == "already-spent"  # do not ask it
        outcome = results_for(ledger, reused["ledger"], answers)  # no NotThisResume
        assert outcome.approvals == {"call-1": ToolDenied(DECIDED_BEFORE)}
        assert not outcome.decisions["call-1"].decided_here
        assert _pa_run(tmp_path, reused, outcome) == f"tool said: {DECIDED_BEFORE}"
    assert lines(tmp_path / "tool.log") == ["start", "done"]


def test_the_agents_sdk_marks_a_reused_request_and_rejects_it(tmp_path: Path) -> None:
    async def go() -> str:
        ledger = AsyncMemoryLedger()
        await oa_app.pause(tmp_path, ledger)
        assert await oa_app.resume(tmp_path, ledger, None) == "tool said: sent"
        await oa_app.pause(tmp_path, ledger)  # same conversation id, same call id
        saved = json.loads((tmp_path / "run.json").read_text())
        assert saved["ledger"]["call-1"]["decided"] == "already-spent"
        agent = oa_app.make_agent(tmp_path / "tool.log")
        state = await RunState.from_string(agent, saved["state"])
        outcome = await aapply_answers(ledger, state, saved["ledger"], {})
        assert outcome.applied
        assert outcome.decisions["call-1"].message == DECIDED_BEFORE
        return str((await Runner.run(agent, state)).final_output)

    assert asyncio.run(go()) == f"tool said: {DECIDED_BEFORE}"
    assert lines(tmp_path / "tool.log") == ["start", "done"]


def test_a_sync_mint_refuses_an_async_ledger_and_names_the_async_form(tmp_path: Path) -> None:
    from ledger_pydantic_ai import mint_requests

    with pytest.raises(TypeError, match="use amint_requests"):
        mint_requests(AsyncMemoryLedger(), _one_request(), conversation_id="c")


def _one_request() -> Any:
    from pydantic_ai import DeferredToolRequests
    from pydantic_ai.messages import ToolCallPart

    return DeferredToolRequests(approvals=[ToolCallPart("transfer", {}, tool_call_id="call-1")])


# The same refusals -----------------------------------------------------------------------


@pytest.mark.parametrize("empty", [{}, DeferredToolResults()])
def test_pydantic_ai_refuses_an_empty_answer_mapping(tmp_path: Path, empty: Any) -> None:
    with SQLiteLedger(tmp_path / "ledger.db") as ledger:
        saved = pa_app.pause(tmp_path, ledger)
        with pytest.raises(InvalidAnswer, match="no answers given"):
            results_for(ledger, saved["ledger"], empty)
        assert ledger.is_spent("pydantic-ai/conv-1/call-1") is False


def test_the_shared_batch_refuses_an_empty_answer_mapping() -> None:
    ledger = MemoryLedger()
    with pytest.raises(InvalidAnswer, match="no answers given"):
        decide_all(ledger, {"c1": mint(ledger, "r").to_dict()}, {})


@pytest.mark.parametrize("answer", [None, "yes", {"approve": True}])
def test_langgraph_resume_reads_the_answer_before_langgraph_does(
    tmp_path: Path, answer: object
) -> None:
    """``Command(resume=None)`` crashes inside LangGraph itself; ``gate.resume`` refuses it
    (and every other non-answer) with the others' ``InvalidAnswer``, nothing resumed."""
    ledger = MemoryLedger()
    graph = lg_app.build(ledger, InMemorySaver(), tmp_path / "tool.log")
    graph.invoke({"amount": 1}, lg_app.config())
    gate = LedgerGate(ledger, request_key=lambda state: "call-1")
    with pytest.raises(InvalidAnswer, match="nothing was spent"):
        gate.resume(graph, answer, lg_app.config())
    assert ledger.is_spent("langgraph/thread-1/call-1") is False
    assert gate.resume(graph, True, lg_app.config())["result"] == "sent"


def test_langgraph_asks_again_with_a_reason_after_a_store_switch(tmp_path: Path) -> None:
    with SQLiteLedger(tmp_path / "a.db") as a, SQLiteLedger(tmp_path / "b.db") as b:
        saver = InMemorySaver()
        lg_app.build(a, saver, tmp_path / "tool.log").invoke({"amount": 1}, lg_app.config())
        out = lg_app.build(b, saver, tmp_path / "tool.log").invoke(
            Command(resume=True), lg_app.config()
        )
        payload = out["__interrupt__"][0].value
    assert str(a.store_id) in payload["reason"]
    assert str(b.store_id) in payload["reason"]
    assert "nothing was spent" in payload["reason"]


# This call ran it, or another resume did --------------------------------------------------


def test_langgraph_resume_of_a_finished_thread_is_told_it_lost(tmp_path: Path) -> None:
    ledger = MemoryLedger()
    graph = lg_app.build(ledger, InMemorySaver(), tmp_path / "tool.log")
    gate = LedgerGate(ledger, request_key=lambda state: "call-1")
    graph.invoke({"amount": 1}, lg_app.config())
    assert gate.resume(graph, True, lg_app.config())["result"] == "sent"
    with pytest.raises(ThreadNotPaused) as caught:  # a NotThisResume, not the final state
        gate.resume(graph, True, lg_app.config())
    assert isinstance(caught.value, NotThisResume)
    assert str(caught.value) == PAST_THE_PAUSE
    # A raw Command answers the finished thread with its final state: LangGraph's own
    # behaviour, which is why gate.resume pins the pause and reads the thread first.
    assert graph.invoke(Command(resume=True), lg_app.config())["result"] == "sent"
    assert lines(tmp_path / "tool.log") == ["start", "done"]


def test_langgraph_resume_pinned_to_the_pause_raises_for_the_loser(tmp_path: Path) -> None:
    """The winner finishes between the loser's read and its invoke: pinned, the loser
    re-runs the gate and is refused; its error leaves the winner's head in place."""
    ledger = MemoryLedger()
    graph = lg_app.build(ledger, InMemorySaver(), tmp_path / "tool.log")
    gate = LedgerGate(ledger, request_key=lambda state: "call-1")
    graph.invoke({"amount": 1}, lg_app.config())
    snapshot = graph.get_state(lg_app.config())  # the loser read the pause ...
    assert gate.resume(graph, True, lg_app.config())["result"] == "sent"  # ... the winner ran
    graph.get_state = lambda config: snapshot
    with pytest.raises(NotThisResume, match="already answered"):
        gate.resume(graph, True, lg_app.config(new_attempt_secret()))
    del graph.get_state
    assert graph.get_state(lg_app.config()).values["result"] == "sent"
    assert lines(tmp_path / "tool.log") == ["start", "done"]


def test_two_processes_resuming_through_the_gate_one_runs_one_is_told(tmp_path: Path) -> None:
    with (
        SQLiteLedger(tmp_path / "ledger.db") as ledger,
        SqliteSaver.from_conn_string(str(tmp_path / "checkpoints.db")) as saver,
    ):
        lg_app.build(ledger, saver, tmp_path / "tool.log").invoke({"amount": 1}, lg_app.config())
    args = [(str(tmp_path), new_attempt_secret(), False, True) for _ in range(2)]
    results, codes = in_processes(lg_app.resume_in_process, args)
    assert codes == [0, 0]
    told = f"error ThreadNotPaused: {PAST_THE_PAUSE}"
    assert results[1] == "sent"
    assert results[0] in {ALREADY, told}, results  # never the winner's "sent"
    assert lines(tmp_path / "tool.log") == ["start", "done"]


def test_an_async_gate_resume_tells_the_loser(tmp_path: Path) -> None:
    async def go() -> list[str]:
        ledger = await AsyncSQLiteLedger.open(tmp_path / "l.db")
        try:
            graph = lg_app.build(ledger, InMemorySaver(), tmp_path / "tool.log")
            gate = LedgerGate(ledger, request_key=lambda state: "call-1")
            await graph.ainvoke({"amount": 1}, lg_app.config())
            first = await gate.aresume(graph, True, lg_app.config())
            try:
                await gate.aresume(graph, True, lg_app.config())
            except ThreadNotPaused as lost:
                return [first["result"], str(lost)]
            return [first["result"], "not told"]
        finally:
            await ledger.aclose()

    assert asyncio.run(go()) == ["sent", PAST_THE_PAUSE]
