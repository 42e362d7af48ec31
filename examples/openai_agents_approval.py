"""OpenAI Agents SDK: a tool with needs_approval, resumed from the serialized run state.

Run: pip install 'decision-ledger[openai-agents]' && python examples/openai_agents_approval.py
(A scripted Model stands in for the LLM, so it runs offline and without an API key.)
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from collections.abc import AsyncIterator
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

from ledger_core import new_attempt_secret, open_async_ledger
from ledger_openai_agents import NotThisResume, aapply_answers, amint_interruptions


class Scripted(Model):
    """Calls ``transfer``, then repeats what it returned."""

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        items = kwargs["input"] if isinstance(kwargs.get("input"), list) else []
        done = [i for i in items if isinstance(i, dict) and i.get("type") == "function_call_output"]
        if done:
            text = ResponseOutputText(type="output_text", text=done[-1]["output"], annotations=[])
            reply = ResponseOutputMessage(
                id="m1", type="message", role="assistant", status="completed", content=[text]
            )
            return ModelResponse(output=[reply], usage=Usage(), response_id=None)
        call = ResponseFunctionToolCall(
            type="function_call", call_id="c1", name="transfer", arguments='{"amount": 100}'
        )
        return ModelResponse(output=[call], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError


@function_tool(needs_approval=True)
def transfer(amount: int) -> str:
    """Send money."""
    return f"sent {amount}"


agent = Agent(name="payer", model=Scripted(), tools=[transfer])


async def main(directory: str) -> None:
    set_tracing_disabled(True)
    ledger = await open_async_ledger(f"sqlite:///{directory}/decisions.db")
    first = await Runner.run(agent, "send 100")
    records = await amint_interruptions(ledger, first.interruptions, conversation_id="conv-1")
    saved = json.dumps(  # what the host stores: the run state and the pending records
        {"state": first.to_state().to_string(), "ledger": records}
    )
    print("asked:", [item.tool_name for item in first.interruptions])

    for name in ("first", "second"):  # two resumes (any process): one runs
        paused = json.loads(saved)
        state = await RunState.from_string(agent, paused["state"])
        try:
            outcome = await aapply_answers(
                ledger, state, paused["ledger"], {"c1": True}, attempt_secret=new_attempt_secret()
            )
        except NotThisResume as refused:
            print(name, "resume refused:", refused)
            continue
        if outcome.ask_again:  # the ledger's store changed: persist these, ask again
            print(name, "resume: ask the person again")
            continue
        print(name, "resume:", (await Runner.run(agent, state)).final_output)
    await ledger.aclose()  # type: ignore[attr-defined]


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else tmp))
