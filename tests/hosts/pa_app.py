"""The PydanticAI agent the tests resume (a FunctionModel: no LLM), and its resumer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from ledger_core import open_ledger
from ledger_pydantic_ai import mint_requests, results_for
from tests.hosts.common import ledger_url, tool

CONVERSATION = "conv-1"


def _model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    returns = [p for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
    if returns:
        return ModelResponse(parts=[TextPart(f"tool said: {returns[0].content}")])
    return ModelResponse(parts=[ToolCallPart("transfer", {"amount": 100}, tool_call_id="call-1")])


def make_agent(log: Path, *, crash: bool = False) -> Agent[None, str | DeferredToolRequests]:
    agent: Agent[None, str | DeferredToolRequests] = Agent(
        FunctionModel(_model), output_type=[str, DeferredToolRequests]
    )

    @agent.tool_plain(requires_approval=True)
    def transfer(amount: int) -> str:
        return tool(log, crash)

    return agent


def pause(root: Path, ledger: object) -> dict[str, Any]:
    """The first run: it asks for approval; the history and pending records are saved."""
    result = make_agent(root / "tool.log").run_sync("send 100")
    assert isinstance(result.output, DeferredToolRequests)
    saved = {
        "history": ModelMessagesTypeAdapter.dump_python(result.all_messages(), mode="json"),
        "ledger": mint_requests(ledger, result.output, conversation_id=CONVERSATION),
    }
    (root / "run.json").write_text(json.dumps(saved))
    return saved


def resume(root: Path, ledger: object, secret: str | None, *, crash: bool = False) -> str:
    saved = json.loads((root / "run.json").read_text())
    outcome = results_for(ledger, saved["ledger"], {"call-1": True}, attempt_secret=secret)
    if outcome.ask_again:
        saved["ledger"] = outcome.ask_again  # persist, then ask the person again
        (root / "run.json").write_text(json.dumps(saved))
        return "ask-again"
    history = ModelMessagesTypeAdapter.validate_python(saved["history"])
    result = make_agent(root / "tool.log", crash=crash).run_sync(
        message_history=history, deferred_tool_results=outcome.results
    )
    return str(result.output)


def resume_in_process(workdir: str, secret: str, crash: bool) -> str:
    ledger: Any = open_ledger(ledger_url(Path(workdir)))
    try:
        return resume(Path(workdir), ledger, secret or None, crash=crash)
    finally:
        ledger.close()
