"""OpenAI Agents SDK approvals on a SQLite ledger, no LLM (a scripted Model); the run
state is resumed from its serialized form in other processes."""

from __future__ import annotations

import asyncio
from pathlib import Path

from ledger_core import CloseVerdict, new_attempt_secret
from ledger_openai_agents import aclose_interruptions
from ledger_sqlite import AsyncSQLiteLedger
from tests.hosts import oa_app
from tests.hosts.common import ALREADY, CRASH_EXIT, in_processes, lines


def paused(root: Path) -> None:
    async def go() -> None:
        ledger = await AsyncSQLiteLedger.open(root / "ledger.db")
        try:
            await oa_app.pause(root, ledger)
        finally:
            await ledger.aclose()

    asyncio.run(go())


def test_two_processes_resuming_run_the_tool_once(tmp_path: Path) -> None:
    paused(tmp_path)
    args = [(str(tmp_path), new_attempt_secret(), False) for _ in range(2)]
    results, codes = in_processes(oa_app.resume_in_process, args)
    assert codes == [0, 0]
    assert results == sorted([ALREADY, "tool said: sent"])
    assert lines(tmp_path / "tool.log") == ["start", "done"]


def test_the_winner_reenters_after_a_crash_and_others_are_refused(tmp_path: Path) -> None:
    paused(tmp_path)
    winner, other = new_attempt_secret(), new_attempt_secret()
    _, codes = in_processes(oa_app.resume_in_process, [(str(tmp_path), winner, True)])
    assert codes == [CRASH_EXIT]
    results, _ = in_processes(oa_app.resume_in_process, [(str(tmp_path), other, False)])
    assert results == [ALREADY]
    results, _ = in_processes(oa_app.resume_in_process, [(str(tmp_path), winner, False)])
    assert results == ["tool said: sent"]
    assert lines(tmp_path / "tool.log") == ["start", "start", "done"]


def test_a_close_proves_never_ran_and_a_store_switch_asks_again(tmp_path: Path) -> None:
    async def go() -> None:
        ledger = await AsyncSQLiteLedger.open(tmp_path / "ledger.db")
        moved = await AsyncSQLiteLedger.open(tmp_path / "other.db")
        try:
            await oa_app.pause(tmp_path, ledger)
            assert await oa_app.resume(tmp_path, moved, new_attempt_secret()) == "ask-again"
            assert await moved.is_spent("openai-agents/conv-1/call-1") is False
            # Asked again under the new store; then the pause times out:
            saved = (tmp_path / "run.json").read_text()
            import json

            closures = await aclose_interruptions(moved, json.loads(saved)["ledger"])
            assert closures["call-1"].verdict is CloseVerdict.CLOSED_PROVEN
            late = await oa_app.resume(tmp_path, moved, new_attempt_secret())
            assert late == "tool said: Not run: the host closed this approval after it timed out."
        finally:
            await ledger.aclose()
            await moved.aclose()

    asyncio.run(go())
    assert lines(tmp_path / "tool.log") == []
