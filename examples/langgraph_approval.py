"""LangGraph: a transfer waits for a person; the ledger lets it run at most once.

Run: pip install 'decision-ledger[langgraph]' && python examples/langgraph_approval.py
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from ledger_core import new_attempt_secret, open_ledger
from ledger_langgraph import SECRET_KEY, Action, AttemptSecret, LedgerGate, NotThisResume


class State(TypedDict, total=False):
    amount: int
    ledger_pending: dict[str, Any]  # the pending request, as plain JSON (gate.mint)
    ledger_outcome: dict[str, Any]  # why a call did not run (gate.end)
    result: str


def main(directory: str) -> None:
    ledger = open_ledger(f"sqlite:///{directory}/decisions.db")
    gate = LedgerGate(ledger, request_key=lambda state: "transfer-1")  # e.g. a tool call id

    def transfer(state: State, config: RunnableConfig) -> Any:
        decision = gate.decide(state, config, question=f"Send {state['amount']}?")
        if decision.action is Action.ASK_AGAIN:
            return gate.ask_again()  # the ledger's store changed: mint anew, ask again
        if not decision.run:
            return gate.end(decision)  # denied, or closed by the host
        return {"result": f"sent {state['amount']}"}  # runs at most once

    builder = StateGraph(State)
    builder.add_node("mint_approval", gate.mint)  # its own node, before the interrupt
    builder.add_node("transfer", transfer)
    builder.add_edge(START, "mint_approval")
    builder.add_edge("mint_approval", "transfer")
    builder.add_edge("transfer", END)
    graph = builder.compile(checkpointer=InMemorySaver())

    thread: RunnableConfig = {"configurable": {"thread_id": "thread-1"}}
    paused = graph.invoke({"amount": 100}, thread)
    print("asked:", paused["__interrupt__"][0].value["question"])

    # Two resumes of the same pause (a double click, two workers racing): one runs.
    for name in ("first", "second"):
        attempt: RunnableConfig = {
            "configurable": {
                "thread_id": "thread-1",
                SECRET_KEY: AttemptSecret(new_attempt_secret()),  # this attempt's only
            }
        }
        try:  # gate.resume pins the pause: a resume that lost raises, never "succeeds"
            out = gate.resume(graph, {"approved": True}, attempt)
            print(name, "resume:", out["result"])
        except NotThisResume as refused:
            print(name, "resume refused:", refused)
    ledger.close()  # type: ignore[attr-defined]


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        main(sys.argv[1] if len(sys.argv) > 1 else str(Path(tmp)))
