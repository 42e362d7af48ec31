"""What a newcomer sends as an answer: anything but the accepted forms is refused before
anything is spent, so the person can still answer; the framework's own approval objects
are taken; the documented call shapes work as written."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command
from pydantic_ai import DeferredToolResults, ToolApproved, ToolDenied
from pydantic_ai.messages import ModelMessagesTypeAdapter
from typing_extensions import TypedDict

from ledger_agents import InvalidAnswer, NotThisResume, decide, decide_all
from ledger_core import LedgerError, MemoryLedger, mint
from ledger_langgraph import LedgerGate
from ledger_pydantic_ai import close_requests, results_for
from ledger_sqlite import AsyncSQLiteLedger, SQLiteLedger
from tests.hosts import lg_app, oa_app, pa_app
from tests.hosts.common import lines

NOT_BOOLS: list[object] = ["yes", "false", 1, 0, None, {"approved": True}, [True]]


@pytest.mark.parametrize("answer", NOT_BOOLS)
def test_the_core_glue_refuses_a_non_bool_before_spending(answer: object) -> None:
    ledger = MemoryLedger()
    pending = mint(ledger, "r")
    with pytest.raises(InvalidAnswer, match=r"True \(approve\) or False \(deny\)"):
        decide(ledger, pending, answer)  # type: ignore[arg-type]
    with pytest.raises(InvalidAnswer, match="call 'c1'"):
        decide_all(ledger, {"c1": pending.to_dict()}, {"c1": answer})  # type: ignore[dict-item]
    assert ledger.is_spent("r") is False
    assert isinstance(InvalidAnswer("x"), LedgerError)
    assert decide(ledger, pending, True).run  # still answerable


def _graph(tmp_path: Path, ledger: object, **gate: Any) -> Any:
    return lg_app.build(ledger, InMemorySaver(), tmp_path / "tool.log", **gate)


@pytest.mark.parametrize("answer", ["yes", "false", {"approve": True}, 1, {"approved": "yes"}])
def test_langgraph_asks_again_on_an_invalid_answer_and_spends_nothing(
    tmp_path: Path, answer: object
) -> None:
    with SQLiteLedger(tmp_path / "ledger.db") as ledger:
        graph = _graph(tmp_path, ledger)
        graph.invoke({"amount": 100}, lg_app.config())
        out = graph.invoke(Command(resume=answer), lg_app.config())
        (pause,) = out["__interrupt__"]
        assert "Command(resume=True or False) or Command(resume={" in pause.value["invalid_answer"]
        assert "nothing was spent" in pause.value["invalid_answer"]
        assert ledger.is_spent("langgraph/thread-1/call-1") is False
        done = graph.invoke(Command(resume={"approved": True}), lg_app.config())
    assert done["result"] == "sent"
    assert lines(tmp_path / "tool.log") == ["start", "done"]


def test_langgraph_takes_the_hosts_own_predicate(tmp_path: Path) -> None:
    def approved(answer: object) -> bool:
        if answer not in ("yes", "no"):
            raise InvalidAnswer("answer yes or no")
        return answer == "yes"

    with SQLiteLedger(tmp_path / "ledger.db") as ledger:
        graph = _graph(tmp_path, ledger, approved=approved)
        graph.invoke({"amount": 100}, lg_app.config())
        out = graph.invoke(Command(resume="maybe"), lg_app.config())
        assert out["__interrupt__"][0].value["invalid_answer"] == "answer yes or no"
        assert graph.invoke(Command(resume="yes"), lg_app.config())["result"] == "sent"


class Bare(TypedDict, total=False):
    amount: int
    ledger_pending: dict[str, Any]  # ledger_outcome missing


def test_langgraph_names_an_undeclared_state_key_before_asking(tmp_path: Path) -> None:
    with SQLiteLedger(tmp_path / "ledger.db") as ledger:
        gate = LedgerGate(ledger, request_key=lambda state: "call-1")

        def transfer(state: Bare, config: RunnableConfig) -> Any:
            gate.decide(state, config)
            return {}

        builder = StateGraph(Bare)
        builder.add_node("mint_approval", gate.mint)
        builder.add_node("transfer", transfer)
        builder.add_edge(START, "mint_approval")
        builder.add_edge("mint_approval", "transfer")
        builder.add_edge("transfer", END)
        graph = builder.compile(checkpointer=InMemorySaver())
        with pytest.raises(LookupError, match="no 'ledger_outcome': declare `ledger_pending"):
            graph.invoke({"amount": 1}, lg_app.config())


@pytest.mark.parametrize("answer", ["yes", "false", 1, None, {"approved": True}])
def test_pydantic_ai_refuses_a_non_answer_before_spending(tmp_path: Path, answer: object) -> None:
    with SQLiteLedger(tmp_path / "ledger.db") as ledger:
        saved = pa_app.pause(tmp_path, ledger)
        with pytest.raises(InvalidAnswer, match="True, False, ToolApproved"):
            results_for(ledger, saved["ledger"], {"call-1": answer})  # type: ignore[dict-item]
        assert ledger.is_spent("pydantic-ai/conv-1/call-1") is False


def _run(tmp_path: Path, saved: dict[str, Any], results: DeferredToolResults) -> str:
    history = ModelMessagesTypeAdapter.validate_python(saved["history"])
    agent = pa_app.make_agent(tmp_path / "tool.log")
    return str(agent.run_sync(message_history=history, deferred_tool_results=results).output)


def test_pydantic_ai_takes_its_own_approval_and_the_outcome_is_the_results(
    tmp_path: Path,
) -> None:
    with SQLiteLedger(tmp_path / "ledger.db") as ledger:
        saved = pa_app.pause(tmp_path, ledger)
        results = results_for(ledger, saved["ledger"], {"call-1": ToolApproved()})
        assert isinstance(results, DeferredToolResults)  # as the README says
        assert _run(tmp_path, saved, results) == "tool said: sent"


def test_pydantic_ai_keeps_the_persons_denial_message(tmp_path: Path) -> None:
    with SQLiteLedger(tmp_path / "ledger.db") as ledger:
        saved = pa_app.pause(tmp_path, ledger)
        answers = DeferredToolResults(approvals={"call-1": ToolDenied("not today")})
        results = results_for(ledger, saved["ledger"], answers)
        assert _run(tmp_path, saved, results) == "tool said: not today"
        assert lines(tmp_path / "tool.log") == []


def test_a_second_answer_after_a_denial_is_told_it_was_answered(tmp_path: Path) -> None:
    with SQLiteLedger(tmp_path / "ledger.db") as ledger:
        saved = pa_app.pause(tmp_path, ledger)
        results_for(ledger, saved["ledger"], {"call-1": False})
        with pytest.raises(NotThisResume) as caught:
            results_for(ledger, saved["ledger"], {"call-1": True})
    text = str(caught.value)
    assert "already answered (approved or denied)" in text
    assert "retry it with its attempt secret" in text
    assert "close the pause" in text


@pytest.mark.parametrize("answers", [{"call-1": "yes"}, {"call-1": 1}, {"call-1": None}, {}])
def test_agents_sdk_refuses_a_non_answer_before_spending(
    tmp_path: Path, answers: dict[str, Any]
) -> None:
    from agents import RunState

    from ledger_openai_agents import aapply_answers

    async def go() -> None:
        ledger = await AsyncSQLiteLedger.open(tmp_path / "ledger.db")
        try:
            await oa_app.pause(tmp_path, ledger)
            saved = __import__("json").loads((tmp_path / "run.json").read_text())
            agent = oa_app.make_agent(tmp_path / "tool.log")
            state = await RunState.from_string(agent, saved["state"])
            with pytest.raises(InvalidAnswer):
                await aapply_answers(ledger, state, saved["ledger"], answers)
            assert await ledger.is_spent("openai-agents/conv-1/call-1") is False
            outcome = await aapply_answers(ledger, state, saved["ledger"], {"call-1": False})
            assert outcome.applied
            assert not outcome.decisions["call-1"].run
        finally:
            await ledger.aclose()

    asyncio.run(go())


def test_ask_again_names_both_stores(tmp_path: Path) -> None:
    with SQLiteLedger(tmp_path / "a.db") as a, SQLiteLedger(tmp_path / "b.db") as b:
        saved = pa_app.pause(tmp_path, a)
        outcome = results_for(b, saved["ledger"], {"call-1": True})
        assert outcome.ask_again
        assert outcome.results is None
        assert a.store_id is not None
        assert b.store_id is not None
        assert a.store_id in outcome.reason
        assert b.store_id in outcome.reason
        moved = decide(b, mint(a, "r"), True)
        assert a.store_id in moved.message
        assert b.store_id in moved.message


def test_a_close_on_another_ledger_says_the_pause_is_still_open(tmp_path: Path) -> None:
    with SQLiteLedger(tmp_path / "a.db") as a, SQLiteLedger(tmp_path / "b.db") as b:
        saved = pa_app.pause(tmp_path, a)
        closure = close_requests(b, saved["ledger"])["call-1"]
        assert not closure.proven
        assert "the pause is still open" in closure.reason
        assert str(a.store_id) in closure.reason
        assert str(b.store_id) in closure.reason
        assert a.is_spent("pydantic-ai/conv-1/call-1") is False  # nothing written anywhere


def test_a_thread_minted_before_the_outcome_check_still_resumes(tmp_path: Path) -> None:
    """A record without "outcome_key" (an older version's mint) is not refused for it."""
    with SQLiteLedger(tmp_path / "ledger.db") as ledger:
        gate = LedgerGate(ledger, request_key=lambda state: "call-1")

        def old_mint(state: Bare, config: RunnableConfig) -> Any:
            return {"ledger_pending": mint(ledger, gate.request_id(state, config)).to_dict()}

        def transfer(state: Bare, config: RunnableConfig) -> Any:
            return {"amount": 7} if gate.decide(state, config).run else {}

        builder = StateGraph(Bare)
        builder.add_node("mint_approval", old_mint)
        builder.add_node("transfer", transfer)
        builder.add_edge(START, "mint_approval")
        builder.add_edge("mint_approval", "transfer")
        builder.add_edge("transfer", END)
        graph = builder.compile(checkpointer=InMemorySaver())
        assert "__interrupt__" in graph.invoke({"amount": 1}, lg_app.config())
        assert graph.invoke(Command(resume=True), lg_app.config())["amount"] == 7
