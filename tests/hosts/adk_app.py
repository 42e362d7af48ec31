"""The Google ADK agent the tests resume (a scripted model: no LLM), and its resumer. The
session lives in ADK's own SQLite session service, shared by every process."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.events import Event
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.sessions.sqlite_session_service import SqliteSessionService
from google.adk.tools.function_tool import FunctionTool
from google.adk.tools.tool_confirmation import ToolConfirmation
from google.genai import types

from ledger_google_adk import (
    aclose_confirmations,
    aconfirmations_for,
    amint_confirmations,
    confirmations_for,
    ledger_guard,
)
from tests.hosts.common import tool

APP, USER, CONVERSATION = "payer-app", "user-1", "conv-1"
# The shared tests' view of this framework: its calls, ids and what the model is told.
answer, answer_sync, close = aconfirmations_for, confirmations_for, aclose_confirmations
PREFIX = f"google-adk/{CONVERSATION}/"
REFUSED = "tool said: This tool call is rejected."  # ADK's FunctionTool, for any refusal


def own(record: object, approved: bool) -> ToolConfirmation:
    """The framework's own answer object."""
    return ToolConfirmation(confirmed=approved)


class ScriptedModel(BaseLlm):
    """Calls ``transfer`` (``calls`` times at once), then reports what the tool returned."""

    model: str = "scripted"
    calls: int = 1

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        parts = llm_request.contents[-1].parts or [] if llm_request.contents else []
        said = [p.function_response.response for p in parts if p.function_response]
        if said and said[-1] is not None:
            text = f"tool said: {said[-1].get('result', said[-1].get('error'))}"
            yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text=text)]))
            return
        calls = [
            types.FunctionCall(id=f"call-{n}", name="transfer", args={"amount": 100 * n})
            for n in range(1, self.calls + 1)
        ]
        asked = types.Content(role="model", parts=[types.Part(function_call=c) for c in calls])
        yield LlmResponse(content=asked)


def make_runner(root: Path, *, crash: bool = False, guard: bool = True, calls: int = 1) -> Runner:
    def transfer(amount: int) -> str:
        """Send money."""
        return tool(root / "tool.log", crash)

    agent = LlmAgent(
        name="payer",
        model=ScriptedModel(calls=calls),
        tools=[FunctionTool(transfer, require_confirmation=True)],
        before_tool_callback=ledger_guard if guard else None,
    )
    sessions = SqliteSessionService(str(root / "sessions.db"))
    return Runner(app_name=APP, agent=agent, session_service=sessions)


async def run(runner: Runner, message: types.Content | None) -> tuple[list[Event], str]:
    """One turn (``None``: a run that brings no new message): its events, and the last
    text the model said."""
    events, text = [], ""
    async for event in runner.run_async(user_id=USER, session_id=CONVERSATION, new_message=message):
        events.append(event)
        for part in event.content.parts or [] if event.content else []:
            text = part.text or text
    return events, text


async def pause(root: Path, ledger: object, *, calls: int = 1) -> dict[str, Any]:
    """The first run: the tool asks for confirmation; the pending records are saved."""
    runner = make_runner(root, calls=calls)
    try:
        await runner.session_service.create_session(
            app_name=APP, user_id=USER, session_id=CONVERSATION
        )
        events, _ = await run(runner, types.Content(role="user", parts=[types.Part(text="go")]))
    finally:
        await runner.close()
    saved = {"ledger": await amint_confirmations(ledger, events, conversation_id=CONVERSATION)}
    (root / "run.json").write_text(json.dumps(saved))
    return saved


async def proceed(root: Path, message: types.Content, *, crash: bool = False) -> str:
    """Continue the paused session with the outcome's message: what the model said last."""
    runner = make_runner(root, crash=crash)
    try:
        return (await run(runner, message))[1]
    finally:
        await runner.close()


async def bare_run(root: Path, *, guard: bool) -> str:
    """A run of the session that brings no new message (not through the ledger)."""
    runner = make_runner(root, guard=guard)
    try:
        return (await run(runner, None))[1]
    finally:
        await runner.close()
