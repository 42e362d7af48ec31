"""PydanticAI deferred approvals on a SQLite ledger, no LLM (FunctionModel)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from pydantic_ai.messages import ModelMessagesTypeAdapter

from ledger_core import CloseVerdict, new_attempt_secret
from ledger_pydantic_ai import aresults_for, close_requests, results_for
from ledger_sqlite import AsyncSQLiteLedger, SQLiteLedger
from tests.hosts import pa_app
from tests.hosts.common import ALREADY, CRASH_EXIT, in_processes, lines


def paused(root: Path) -> None:
    with SQLiteLedger(root / "ledger.db") as ledger:
        saved = pa_app.pause(root, ledger)
    assert saved["ledger"]["call-1"]["request_id"] == "pydantic-ai/conv-1/call-1"


def test_two_processes_resuming_run_the_tool_once(tmp_path: Path) -> None:
    paused(tmp_path)
    args = [(str(tmp_path), new_attempt_secret(), False) for _ in range(2)]
    results, codes = in_processes(pa_app.resume_in_process, args)
    assert codes == [0, 0]
    assert results == sorted([ALREADY, "tool said: sent"])
    assert lines(tmp_path / "tool.log") == ["start", "done"]


def test_the_winner_reenters_after_a_crash_and_others_are_refused(tmp_path: Path) -> None:
    paused(tmp_path)
    winner, other = new_attempt_secret(), new_attempt_secret()
    _, codes = in_processes(pa_app.resume_in_process, [(str(tmp_path), winner, True)])
    assert codes == [CRASH_EXIT]
    results, _ = in_processes(pa_app.resume_in_process, [(str(tmp_path), other, False)])
    assert results == [ALREADY]
    results, _ = in_processes(pa_app.resume_in_process, [(str(tmp_path), winner, False)])
    assert results == ["tool said: sent"]
    assert lines(tmp_path / "tool.log") == ["start", "start", "done"]


def test_a_close_proves_never_ran_and_a_late_answer_is_denied(tmp_path: Path) -> None:
    paused(tmp_path)
    with SQLiteLedger(tmp_path / "ledger.db") as ledger:
        saved = pa_app.pause(tmp_path, ledger)
        closures = close_requests(ledger, saved["ledger"])
        assert closures["call-1"].verdict is CloseVerdict.CLOSED_PROVEN
        late = pa_app.resume(tmp_path, ledger, new_attempt_secret())
    assert late == "tool said: Not run: the host closed this approval after it timed out."
    assert lines(tmp_path / "tool.log") == []


def test_a_store_switch_mid_pause_asks_the_person_again(tmp_path: Path) -> None:
    paused(tmp_path)
    with SQLiteLedger(tmp_path / "other.db") as moved:
        assert pa_app.resume(tmp_path, moved, new_attempt_secret()) == "ask-again"
        assert lines(tmp_path / "tool.log") == []
        assert moved.is_spent("pydantic-ai/conv-1/call-1") is False  # nothing spent
        assert pa_app.resume(tmp_path, moved, new_attempt_secret()) == "tool said: sent"
    assert lines(tmp_path / "tool.log") == ["start", "done"]


def test_a_denial_is_spent_and_told_to_the_model(tmp_path: Path) -> None:
    with SQLiteLedger(tmp_path / "ledger.db") as ledger:
        saved = pa_app.pause(tmp_path, ledger)
        outcome = results_for(ledger, saved["ledger"], {"call-1": False})
        assert outcome.results is not None
        assert outcome.results.approvals["call-1"].message == "The person denied this call."  # type: ignore[union-attr]
        assert ledger.is_spent("pydantic-ai/conv-1/call-1") is True


def test_async_ledger(tmp_path: Path) -> None:
    with SQLiteLedger(tmp_path / "ledger.db") as sync_ledger:  # the same store, sync face
        saved = pa_app.pause(tmp_path, sync_ledger)

    async def go() -> str:
        ledger = await AsyncSQLiteLedger.open(tmp_path / "ledger.db")
        try:
            secret = new_attempt_secret()
            outcome = await aresults_for(
                ledger, saved["ledger"], {"call-1": True}, attempt_secret=secret
            )
            history = ModelMessagesTypeAdapter.validate_python(saved["history"])
            agent = pa_app.make_agent(tmp_path / "tool.log")
            result = await agent.run(message_history=history, deferred_tool_results=outcome.results)
            return str(result.output)
        finally:
            await ledger.aclose()

    assert asyncio.run(go()) == "tool said: sent"
