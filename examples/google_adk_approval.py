"""Google ADK: a tool that requires confirmation, answered through the ledger.

Run: pip install 'decision-ledger[google-adk]' && python examples/google_adk_approval.py
(A scripted model stands in for the LLM, so it runs offline and without an API key.)
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from collections.abc import AsyncGenerator

from google.adk.agents import LlmAgent
from google.adk.events import Event
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.sessions.sqlite_session_service import SqliteSessionService
from google.adk.tools.function_tool import FunctionTool
from google.genai import types

from ledger_core import new_attempt_secret, open_async_ledger
from ledger_google_adk import (
    NotThisResume,
    aconfirmations_for,
    amint_confirmations,
    ledger_guard,
    unanswered,
)

USAGE = types.GenerateContentResponseUsageMetadata(
    prompt_token_count=0, candidates_token_count=0, total_token_count=0
)


class Scripted(BaseLlm):
    """Calls ``transfer``, then repeats what it returned."""

    model: str = "scripted"

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        last = llm_request.contents[-1].parts or [] if llm_request.contents else []
        said = [p.function_response.response for p in last if p.function_response]
        if said and said[-1] is not None:
            part = types.Part(text=str(said[-1].get("result", said[-1].get("error"))))
        else:
            call = types.FunctionCall(id="c1", name="transfer", args={"amount": 100})
            part = types.Part(function_call=call)
        yield LlmResponse(content=types.Content(role="model", parts=[part]), usage_metadata=USAGE)


def transfer(amount: int) -> str:
    """Send money."""
    return f"sent {amount}"


agent = LlmAgent(
    name="payer",
    model=Scripted(),
    tools=[FunctionTool(transfer, require_confirmation=True)],
    before_tool_callback=ledger_guard,  # a confirmed call runs only on the ledger's go-ahead
)


async def say(runner: Runner, session_id: str, message: types.Content) -> tuple[list[Event], str]:
    """One turn: its events and the model's last text."""
    events, text = [], ""
    async for event in runner.run_async(user_id="u1", session_id=session_id, new_message=message):
        events.append(event)
        text = (
            next((p.text for p in event.content.parts or [] if p.text), text)
            if event.content
            else text
        )
    return events, text


async def main(directory: str) -> None:
    ledger = await open_async_ledger(f"sqlite:///{directory}/decisions.db")
    sessions = SqliteSessionService(f"{directory}/sessions.db")
    runner = Runner(app_name="payer", agent=agent, session_service=sessions)
    session = await sessions.create_session(app_name="payer", user_id="u1")
    ask = types.Content(role="user", parts=[types.Part(text="send 100")])
    events, _ = await say(runner, session.id, ask)
    saved = json.dumps(  # what the host stores beside the session: the pending records
        {
            "session_id": session.id,
            "ledger": await amint_confirmations(ledger, events, conversation_id=session.id),
        }
    )
    print("asked:", [(c.args or {})["originalFunctionCall"]["name"] for c in unanswered(events)])

    for name in ("first", "second"):  # two resumes (any process): one runs
        paused = json.loads(saved)
        answers = dict.fromkeys(paused["ledger"], True)  # {confirmation call id: True}
        try:
            outcome = await aconfirmations_for(
                ledger, paused["ledger"], answers, attempt_secret=new_attempt_secret()
            )
        except NotThisResume as refused:
            print(name, "resume refused:", refused)
            continue
        if outcome.message is None:  # the ledger's store changed: persist these, ask again
            print(name, "resume: ask the person again")
            continue
        print(name, "resume:", (await say(runner, paused["session_id"], outcome.message))[1])
    await runner.close()
    await ledger.aclose()  # type: ignore[attr-defined]


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else tmp))
