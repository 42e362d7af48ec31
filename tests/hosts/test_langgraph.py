"""LangGraph approvals on a SQLite ledger and SQLite checkpoints, no LLM involved."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.types import Command

from ledger_core import CloseVerdict, MemoryLedger, PendingRequest, new_attempt_secret
from ledger_langgraph import SECRET_KEY, NotThisResume, aclose_thread, close_thread
from ledger_sqlite import AsyncSQLiteLedger, SQLiteLedger
from tests.hosts.common import ALREADY, CRASH_EXIT, in_processes, lines
from tests.hosts.lg_app import (
    build,
    build_unguarded,
    config,
    outcome,
    resume_in_process,
    resume_unguarded_in_process,
)


def pause(root: Path) -> None:
    """The first run, in the parent: mint, then the interrupt asks the person."""
    with (
        SQLiteLedger(root / "ledger.db") as ledger,
        SqliteSaver.from_conn_string(str(root / "checkpoints.db")) as saver,
    ):
        out = build(ledger, saver, root / "tool.log").invoke({"amount": 100}, config())
        assert outcome(out) == "interrupted"
        request = out["__interrupt__"][0].value
        assert request["question"] == "Send 100?"
        assert request["ledger_request"]["request_id"] == "langgraph/thread-1/call-1"


def test_two_processes_resuming_run_the_tool_once(tmp_path: Path) -> None:
    pause(tmp_path)
    secrets = [new_attempt_secret() for _ in range(2)]
    results, codes = in_processes(resume_in_process, [(str(tmp_path), s, False) for s in secrets])
    assert codes == [0, 0]
    # The loser is refused, or, when the winner's graph finished before the loser read
    # the checkpoint, answered with the final state without running anything: what ran
    # is judged by the tool's own log.
    assert "sent" in results
    assert set(results) <= {ALREADY, "sent"}, results
    assert lines(tmp_path / "tool.log") == ["start", "done"]


def test_control_without_a_ledger_both_processes_run_the_tool(tmp_path: Path) -> None:
    """What the ledger prevents: the same race on a bare interrupt runs the tool twice."""
    with SqliteSaver.from_conn_string(str(tmp_path / "checkpoints.db")) as saver:
        build_unguarded(saver, tmp_path / "tool.log").invoke({"amount": 1}, config())
    results, _ = in_processes(resume_unguarded_in_process, [(str(tmp_path),), (str(tmp_path),)])
    assert results == ["sent", "sent"]
    assert sorted(lines(tmp_path / "tool.log")) == ["done", "done", "start", "start"]


def test_the_winner_reenters_after_a_crash_and_others_are_refused(tmp_path: Path) -> None:
    """Crash between spend and tool (SQLite: MarkerReentry, the id then the winner marker)."""
    pause(tmp_path)
    winner, other = new_attempt_secret(), new_attempt_secret()
    _, codes = in_processes(resume_in_process, [(str(tmp_path), winner, True)])
    assert codes == [CRASH_EXIT]
    assert lines(tmp_path / "tool.log") == ["start"]
    results, _ = in_processes(resume_in_process, [(str(tmp_path), other, False)])
    assert results == [ALREADY]
    results, _ = in_processes(resume_in_process, [(str(tmp_path), winner, False)])
    assert results == ["sent"]
    assert lines(tmp_path / "tool.log") == ["start", "start", "done"]


def test_without_a_secret_a_retry_after_the_crash_is_refused(tmp_path: Path) -> None:
    """The behaviour before re-entry, kept when no attempt secret is given."""
    pause(tmp_path)
    _, codes = in_processes(resume_in_process, [(str(tmp_path), "", True)])
    assert codes == [CRASH_EXIT]
    results, _ = in_processes(resume_in_process, [(str(tmp_path), "", False)])
    assert results == [ALREADY]


@pytest.mark.parametrize("store", ["memory", "sqlite"])
def test_a_retry_policy_reenters_instead_of_burning_the_approval(
    store: str, tmp_path: Path
) -> None:
    """memory: C10 ``spend_as`` in one step; sqlite: MarkerReentry (id, then marker)."""
    ledger = MemoryLedger() if store == "memory" else SQLiteLedger(tmp_path / "l.db")
    graph = build(ledger, InMemorySaver(), tmp_path / "tool.log", fail_first=1)
    graph.invoke({"amount": 5}, config())
    out = graph.invoke(Command(resume=True), config(new_attempt_secret()))
    ledger.close()
    assert outcome(out) == "sent"
    assert lines(tmp_path / "tool.log") == ["start", "done"]


def test_without_a_secret_a_retry_policy_burns_the_approval(tmp_path: Path) -> None:
    """The issue as reported, kept when no secret is given: the retry is refused."""
    graph = build(MemoryLedger(), InMemorySaver(), tmp_path / "tool.log", fail_first=1)
    graph.invoke({"amount": 5}, config())
    with pytest.raises(NotThisResume):
        graph.invoke(Command(resume=True), config())
    assert lines(tmp_path / "tool.log") == []


def test_a_close_proves_never_ran_and_a_late_answer_is_told(tmp_path: Path) -> None:
    pause(tmp_path)
    with (
        SQLiteLedger(tmp_path / "ledger.db") as ledger,
        SqliteSaver.from_conn_string(str(tmp_path / "checkpoints.db")) as saver,
    ):
        graph = build(ledger, saver, tmp_path / "tool.log")
        closure = close_thread(ledger, graph, config())
        assert closure.verdict is CloseVerdict.CLOSED_PROVEN
        assert closure.recorded
        late = graph.invoke(Command(resume=True), config(new_attempt_secret()))
        assert "the host closed this approval" in outcome(late)
        assert close_thread(ledger, graph, config()).verdict is CloseVerdict.CLOSED_PROVEN
    assert lines(tmp_path / "tool.log") == []


def test_a_store_switch_mid_pause_asks_the_person_again(tmp_path: Path) -> None:
    pause(tmp_path)
    with (
        SQLiteLedger(tmp_path / "other.db") as moved,
        SqliteSaver.from_conn_string(str(tmp_path / "checkpoints.db")) as saver,
    ):
        graph = build(moved, saver, tmp_path / "tool.log")
        again = graph.invoke(Command(resume=True), config(new_attempt_secret()))
        assert outcome(again) == "interrupted"  # asked again, under the new store
        assert again["__interrupt__"][0].value["ledger_request"]["store_id"] == moved.store_id
        assert lines(tmp_path / "tool.log") == []
        done = graph.invoke(Command(resume=True), config(new_attempt_secret()))
        assert outcome(done) == "sent"
    assert lines(tmp_path / "tool.log") == ["start", "done"]


def test_a_denial_is_spent_too(tmp_path: Path) -> None:
    with SQLiteLedger(tmp_path / "l.db") as ledger:
        graph = build(ledger, InMemorySaver(), tmp_path / "tool.log")
        graph.invoke({"amount": 5}, config())
        out = graph.invoke(Command(resume={"approved": False}), config())
        assert outcome(out) == "The person denied this call."
        assert ledger.is_spent("langgraph/thread-1/call-1") is True


def test_the_checkpointer_stores_plain_data_without_warnings(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """LangGraph logs "Deserializing unregistered type" for a PendingRequest object in the
    state (the control below); the gate stores the dict form, so it logs nothing."""
    caplog.set_level(logging.DEBUG)
    pause(tmp_path)
    with (
        SQLiteLedger(tmp_path / "ledger.db") as ledger,
        SqliteSaver.from_conn_string(str(tmp_path / "checkpoints.db")) as saver,
    ):
        state = build(ledger, saver, tmp_path / "tool.log").get_state(config())
        assert state.values["ledger_pending"]["kind"] == "pending-request"
    assert "unregistered type" not in caplog.text
    # Control: the object itself in a checkpoint is what LangGraph warns about.
    with SqliteSaver.from_conn_string(str(tmp_path / "control.db")) as saver:
        saver.put(
            {"configurable": {"thread_id": "c", "checkpoint_ns": ""}},
            empty_checkpoint() | {"channel_values": {"p": PendingRequest("r", "s")}},
            {},
            {},
        )
        saver.get({"configurable": {"thread_id": "c", "checkpoint_ns": ""}})
    assert "unregistered type ledger_core.host.PendingRequest" in caplog.text


def test_async_graph_on_async_checkpointer_and_ledger(tmp_path: Path) -> None:
    async def go() -> tuple[list[str], Any]:
        ledger = await AsyncSQLiteLedger.open(tmp_path / "l.db")
        try:
            async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "cp.db")) as saver:
                graph = build(ledger, saver, tmp_path / "tool.log", fail_first=1)
                await graph.ainvoke({"amount": 7}, config())
                secrets = [new_attempt_secret() for _ in range(4)]
                outs = await asyncio.gather(
                    *(graph.ainvoke(Command(resume=True), config(s)) for s in secrets),
                    return_exceptions=True,
                )
                closure = await aclose_thread(ledger, graph, config())
                return sorted(
                    f"error {type(o).__name__}: {o}" if isinstance(o, BaseException) else outcome(o)
                    for o in outs
                ), closure
        finally:
            await ledger.aclose()

    results, closure = asyncio.run(go())
    assert results == sorted([ALREADY] * 3 + ["sent"])
    assert closure.verdict is CloseVerdict.POSSIBLY_RUN
    assert lines(tmp_path / "tool.log") == ["start", "done"]


def test_the_attempt_secret_is_not_written_to_the_checkpoints(tmp_path: Path) -> None:
    """LangGraph copies configurable values into checkpoint metadata unless the key names
    a secret; SECRET_KEY does, so the secret never lands in the checkpointer's file."""
    pause(tmp_path)
    secret = new_attempt_secret()
    results, _ = in_processes(resume_in_process, [(str(tmp_path), secret, False)])
    assert results == ["sent"]
    stored = b"".join(p.read_bytes() for p in tmp_path.glob("checkpoints.db*"))
    assert b"thread-1" in stored  # the search can find configurable values
    assert secret.encode() not in stored


def test_a_plain_string_secret_is_refused_before_any_spend(tmp_path: Path) -> None:
    with SQLiteLedger(tmp_path / "l.db") as ledger:
        graph = build(ledger, InMemorySaver(), tmp_path / "tool.log")
        graph.invoke({"amount": 5}, config())
        plain = {"configurable": {"thread_id": "thread-1", SECRET_KEY: new_attempt_secret()}}
        with pytest.raises(TypeError, match="AttemptSecret"):
            graph.invoke(Command(resume=True), plain)
        assert ledger.is_spent("langgraph/thread-1/call-1") is False
