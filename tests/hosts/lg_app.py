"""The LangGraph graph the tests resume, in the parent and in spawned processes."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, RetryPolicy
from typing_extensions import TypedDict

from ledger_core import open_ledger
from ledger_langgraph import SECRET_KEY, Action, AttemptSecret, LedgerGate
from tests.hosts.common import ledger_url, lines, log_line, tool

THREAD = "thread-1"


class State(TypedDict, total=False):
    amount: int
    ledger_pending: dict[str, Any]
    ledger_outcome: dict[str, Any] | None
    result: str


def config(secret: str | None = None) -> RunnableConfig:
    configurable: dict[str, Any] = {"thread_id": THREAD}
    if secret is not None:
        configurable[SECRET_KEY] = AttemptSecret(secret)
    return {"configurable": configurable}


def build(
    ledger: object,
    saver: Any,
    log: Path,
    *,
    crash: bool = False,
    fail_first: int = 0,
    **gate_options: Any,
) -> Any:
    """START -> mint_approval -> transfer -> END; ``fail_first`` transient tool errors
    are retried by the node's RetryPolicy."""
    gate = LedgerGate(ledger, request_key=lambda state: "call-1", **gate_options)
    failures = [fail_first]

    def transfer(state: State, config: RunnableConfig) -> Any:
        decision = gate.decide(state, config, question=f"Send {state['amount']}?")
        if decision.action is Action.ASK_AGAIN:
            return gate.ask_again()
        if not decision.run:
            return gate.end(decision)
        if failures[0] > 0:
            failures[0] -= 1
            raise ConnectionError("transient tool error")
        return {"result": tool(log, crash)}

    async def atransfer(state: State, config: RunnableConfig) -> Any:
        decision = await gate.adecide(state, config, question=f"Send {state['amount']}?")
        if decision.action is Action.ASK_AGAIN:
            return gate.ask_again()
        if not decision.run:
            return gate.end(decision)
        if failures[0] > 0:
            failures[0] -= 1
            raise ConnectionError("transient tool error")
        return {"result": tool(log, crash)}

    is_async = hasattr(ledger, "aclose")
    builder = StateGraph(State)
    builder.add_node("mint_approval", gate.mint)
    builder.add_node(
        "transfer",
        atransfer if is_async else transfer,
        retry_policy=RetryPolicy(max_attempts=3, initial_interval=0.01, jitter=False),
    )
    builder.add_edge(START, "mint_approval")
    builder.add_edge("mint_approval", "transfer")
    builder.add_edge("transfer", END)
    return builder.compile(checkpointer=saver)


def outcome(out: dict[str, Any]) -> str:
    if "__interrupt__" in out:
        return "interrupted"
    if out.get("result"):
        return str(out["result"])
    return str(out["ledger_outcome"]["message"])


def resume_in_process(workdir: str, secret: str, crash: bool, through_gate: bool = False) -> str:
    """One resumer process: its own ledger and checkpointer over the shared files; with
    ``through_gate``, by ``gate.resume`` (pinned to the pause: a loser raises)."""
    root = Path(workdir)
    ledger: Any = open_ledger(ledger_url(root))
    try:
        with SqliteSaver.from_conn_string(str(root / "checkpoints.db")) as saver:
            graph = build(ledger, saver, root / "tool.log", crash=crash)
            if through_gate:
                gate = LedgerGate(ledger, request_key=lambda state: "call-1")
                return outcome(gate.resume(graph, True, config(secret or None)))
            return outcome(graph.invoke(Command(resume=True), config(secret or None)))
    finally:
        ledger.close()


def _both_resumed(marks: Path, parties: int = 2, within: float = 60.0) -> None:
    """A rendezvous: wait (bounded) until both racing processes have resumed the pause,
    so the control race is a real one even when one process would otherwise finish
    before the other reads the checkpoint."""
    log_line(marks, "resumed")
    deadline = time.monotonic() + within
    while len(lines(marks)) < parties and time.monotonic() < deadline:
        time.sleep(0.01)


def build_unguarded(saver: Any, log: Path) -> Any:
    """The same approval with a bare ``interrupt()`` and no ledger: the control group."""
    from langgraph.types import interrupt

    def transfer(state: State) -> Any:
        if interrupt({"question": "Send?"}) is True:
            _both_resumed(log.with_name("resumed.log"))
            return {"result": tool(log, False)}
        return {"result": "denied"}

    builder = StateGraph(State)
    builder.add_node("transfer", transfer)
    builder.add_edge(START, "transfer")
    builder.add_edge("transfer", END)
    return builder.compile(checkpointer=saver)


def resume_unguarded_in_process(workdir: str) -> str:
    root = Path(workdir)
    with SqliteSaver.from_conn_string(str(root / "checkpoints.db")) as saver:
        graph = build_unguarded(saver, root / "tool.log")
        return outcome(graph.invoke(Command(resume=True), config()))
