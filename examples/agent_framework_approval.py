"""Microsoft Agent Framework: a tool with approval_mode="always_require", resumed from the
serialized session through the ledger.

Run: pip install 'decision-ledger[agent-framework]' && python examples/agent_framework_approval.py
(A scripted chat client stands in for the LLM, so it runs offline and without an API key.)
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from collections.abc import Awaitable, Mapping, Sequence
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

from ledger_agent_framework import NotThisResume, amint_approvals, aresponses_for
from ledger_core import new_attempt_secret, open_async_ledger


class Scripted(FunctionInvocationLayer[Any], BaseChatClient[Any]):
    """Calls ``transfer``, then repeats what it returned."""

    async def _reply(self, messages: Sequence[Message]) -> ChatResponse[Any]:
        done = [c for m in messages for c in m.contents if c.type == "function_result"]
        if done:
            return ChatResponse(messages=[Message(role="assistant", contents=[done[-1].result])])
        call = Content.from_function_call("c1", "transfer", arguments={"amount": 100})
        return ChatResponse(messages=[Message(role="assistant", contents=[call])])

    def _inner_get_response(
        self, *, messages: Sequence[Message], stream: bool, options: Mapping[str, Any], **kw: Any
    ) -> Awaitable[ChatResponse[Any]]:
        return self._reply(messages)


@tool(approval_mode="always_require")
def transfer(amount: int) -> str:
    """Send money."""
    return f"sent {amount}"


agent = Agent(client=Scripted(), tools=[transfer])


async def main(directory: str) -> None:
    ledger = await open_async_ledger(f"sqlite:///{directory}/decisions.db")
    session = agent.create_session()
    first = await agent.run("send 100", session=session)
    saved = json.dumps(  # what the host stores: the session and the pending records
        {
            "session": session.to_dict(),
            "ledger": await amint_approvals(
                ledger, first.user_input_requests, conversation_id=session.session_id
            ),
        }
    )
    print("asked:", [r.function_call.name for r in first.user_input_requests])  # type: ignore[union-attr]

    for name in ("first", "second"):  # two resumes (any process): one runs
        paused = json.loads(saved)
        answers = dict.fromkeys(paused["ledger"], True)  # {approval request id: True}
        try:
            outcome = await aresponses_for(
                ledger, paused["ledger"], answers, attempt_secret=new_attempt_secret()
            )
        except NotThisResume as refused:
            print(name, "resume refused:", refused)
            continue
        if outcome.message is None:  # the ledger's store changed: persist these, ask again
            print(name, "resume: ask the person again")
            continue
        resumed = AgentSession.from_dict(paused["session"])
        print(name, "resume:", (await agent.run(outcome.message, session=resumed)).text)
    await ledger.aclose()  # type: ignore[attr-defined]


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else tmp))
