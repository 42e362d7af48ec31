"""PydanticAI: a deferred tool approval, decided at most once by the ledger.

Run: pip install 'decision-ledger[pydantic-ai]' && python examples/pydantic_ai_approval.py
(A FunctionModel stands in for the LLM, so it runs offline.)
"""

from __future__ import annotations

import json
import sys
import tempfile

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

from ledger_core import new_attempt_secret, open_ledger
from ledger_pydantic_ai import NotThisResume, mint_requests, results_for


def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    returns = [p for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
    if returns:
        return ModelResponse(parts=[TextPart(f"done: {returns[0].content}")])
    return ModelResponse(parts=[ToolCallPart("transfer", {"amount": 100}, tool_call_id="c1")])


agent = Agent(FunctionModel(model), output_type=[str, DeferredToolRequests])


@agent.tool_plain(requires_approval=True)
def transfer(amount: int) -> str:
    return f"sent {amount}"


def main(directory: str) -> None:
    ledger = open_ledger(f"sqlite:///{directory}/decisions.db")
    first = agent.run_sync("send 100")
    assert isinstance(first.output, DeferredToolRequests)
    saved = json.dumps(  # what the host stores with the paused conversation
        {
            "history": ModelMessagesTypeAdapter.dump_python(first.all_messages(), mode="json"),
            "ledger": mint_requests(ledger, first.output, conversation_id=first.run_id),
        }
    )
    print("asked:", [call.tool_name for call in first.output.approvals])

    for name in ("first", "second"):  # two resumes of the same approval: one runs
        paused = json.loads(saved)
        try:
            outcome = results_for(
                ledger, paused["ledger"], {"c1": True}, attempt_secret=new_attempt_secret()
            )
        except NotThisResume as refused:
            print(name, "resume refused:", refused)
            continue
        if outcome.ask_again:  # the ledger's store changed: persist these, ask again
            print(name, "resume: ask the person again")
            continue
        result = agent.run_sync(
            message_history=ModelMessagesTypeAdapter.validate_python(paused["history"]),
            deferred_tool_results=outcome.results,
        )
        print(name, "resume:", result.output)
    ledger.close()  # type: ignore[attr-defined]


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        main(sys.argv[1] if len(sys.argv) > 1 else tmp)
