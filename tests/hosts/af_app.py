"""The Microsoft Agent Framework agent the tests resume (a scripted chat client: no LLM),
and its resumer; the session is persisted as ``session.to_dict()`` JSON."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Mapping, Sequence
from pathlib import Path
from typing import Any

from agent_framework import (
    Agent,
    AgentSession,
    BaseChatClient,
    ChatResponse,
    Content,
    FunctionInvocationLayer,
    Message,
    tool,
)

from ledger_agent_framework import (
    aclose_approvals,
    amint_approvals,
    aresponses_for,
    responses_for,
)
from tests.hosts import common

CONVERSATION = "conv-1"
# The shared tests' view of this framework: its calls, ids and what the model is told.
answer, answer_sync, close = aresponses_for, responses_for, aclose_approvals
PREFIX = f"agent-framework/{CONVERSATION}/"
REFUSED = "tool said: Error: Tool call invocation was rejected by user."  # for any refusal


def own(record: Any, approved: bool) -> Content:
    """The framework's own answer object."""
    return Content.from_dict(record["approval_request"]).to_function_approval_response(approved)


class ScriptedClient(FunctionInvocationLayer[Any], BaseChatClient[Any]):
    """Calls ``transfer`` (``calls`` times at once), then reports what the tool returned."""

    def __init__(self, calls: int = 1) -> None:
        super().__init__()
        self.calls = calls

    async def _reply(self, messages: Sequence[Message]) -> ChatResponse[Any]:
        results = [c for m in messages for c in m.contents if c.type == "function_result"]
        if results:
            said = Message(role="assistant", contents=[f"tool said: {results[-1].result}"])
            return ChatResponse(messages=[said])
        calls = [
            Content.from_function_call(f"call-{n}", "transfer", arguments={"amount": 100 * n})
            for n in range(1, self.calls + 1)
        ]
        return ChatResponse(messages=[Message(role="assistant", contents=calls)])

    def _inner_get_response(
        self, *, messages: Sequence[Message], stream: bool, options: Mapping[str, Any], **kw: Any
    ) -> Awaitable[ChatResponse[Any]]:
        return self._reply(messages)


def make_agent(log: Path, *, crash: bool = False, calls: int = 1) -> Agent[Any]:
    @tool(approval_mode="always_require")
    def transfer(amount: int) -> str:
        """Send money."""
        return common.tool(log, crash)

    return Agent(client=ScriptedClient(calls), tools=[transfer])


async def pause(root: Path, ledger: object, *, calls: int = 1) -> dict[str, Any]:
    """The first run: it asks for approval; the session and pending records are saved."""
    agent = make_agent(root / "tool.log", calls=calls)
    session = agent.create_session(session_id=CONVERSATION)
    result = await agent.run("send 100", session=session)
    saved = {
        "session": session.to_dict(),
        "ledger": await amint_approvals(
            ledger, result.user_input_requests, conversation_id=CONVERSATION
        ),
    }
    (root / "run.json").write_text(json.dumps(saved))
    return saved


async def proceed(root: Path, message: Message, *, crash: bool = False) -> str:
    """Continue the saved session with the outcome's message: what the model said last."""
    session = AgentSession.from_dict(json.loads((root / "run.json").read_text())["session"])
    result = await make_agent(root / "tool.log", crash=crash).run(message, session=session)
    return result.text
