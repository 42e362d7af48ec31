"""The OpenAI Agents SDK agent the tests resume (a scripted Model: no LLM), and its resumer."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from agents import Agent, Runner, RunState, function_tool, set_tracing_disabled
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from ledger_openai_agents import aapply_answers, amint_interruptions
from tests.hosts import resumer
from tests.hosts.common import tool

CONVERSATION = "conv-1"
CALL_OUTPUT = "function_call_output"
set_tracing_disabled(True)  # no exporter, no network


class ScriptedModel(Model):
    """Calls ``transfer`` (``calls`` times in one turn), then reports what it returned."""

    def __init__(self, calls: int = 1) -> None:
        self.calls = calls

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        given = kwargs["input"] if "input" in kwargs else args[1]
        items = given if isinstance(given, list) else []
        outputs = [i for i in items if isinstance(i, dict) and i.get("type") == CALL_OUTPUT]
        if outputs:
            text = ResponseOutputText(
                type="output_text", text=f"tool said: {outputs[-1]['output']}", annotations=[]
            )
            message = ResponseOutputMessage(
                id="msg-1", type="message", role="assistant", status="completed", content=[text]
            )
            return ModelResponse(output=[message], usage=Usage(), response_id=None)
        calls = [
            ResponseFunctionToolCall(
                id=f"fc-{n}", type="function_call", call_id=f"call-{n}", name="transfer",
                arguments=json.dumps({"amount": 100}),
            )
            for n in range(1, self.calls + 1)
        ]  # fmt: skip
        return ModelResponse(output=list(calls), usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError


def make_agent(log: Path, *, crash: bool = False, calls: int = 1) -> Agent[Any]:
    @function_tool(needs_approval=True)
    def transfer(amount: int) -> str:
        """Send money."""
        return tool(log, crash)

    return Agent(name="payer", model=ScriptedModel(calls), tools=[transfer])


async def pause(root: Path, ledger: object) -> None:
    result = await Runner.run(make_agent(root / "tool.log"), "send 100")
    assert [i.tool_name for i in result.interruptions] == ["transfer"]
    saved = {
        "state": result.to_state().to_string(),
        "ledger": await amint_interruptions(
            ledger, result.interruptions, conversation_id=CONVERSATION
        ),
    }
    (root / "run.json").write_text(json.dumps(saved))


async def resume(root: Path, ledger: object, secret: str | None, *, crash: bool = False) -> str:
    saved = json.loads((root / "run.json").read_text())
    agent = make_agent(root / "tool.log", crash=crash)
    state = await RunState.from_string(agent, saved["state"])
    outcome = await aapply_answers(
        ledger, state, saved["ledger"], {"call-1": True}, attempt_secret=secret
    )
    if outcome.ask_again:
        saved["ledger"] = outcome.ask_again
        (root / "run.json").write_text(json.dumps(saved))
        return "ask-again"
    result = await Runner.run(agent, state)
    return str(result.final_output)


def resume_in_process(workdir: str, secret: str, crash: bool) -> str:
    return resumer.in_process(resume, workdir, secret, crash)
