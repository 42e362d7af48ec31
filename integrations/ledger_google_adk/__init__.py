"""Google ADK tool confirmations, decided at most once by a decision ledger.

A tool asks for confirmation (``FunctionTool(fn, require_confirmation=True)`` or
``tool_context.request_confirmation()``): the run pauses on an ``adk_request_confirmation``
function call. ``mint_confirmations`` turns the paused run's events into pending records
(plain JSON, persisted beside the session), keyed by that confirmation call's id;
``confirmations_for`` spends the person's answers (``True``/``False`` or a
``ToolConfirmation``; anything else is refused before anything is spent) and returns an
:class:`Outcome` whose ``message`` is the ``new_message`` for ``runner.run_async``
(``confirmed`` only for the calls the ledger lets run), or asks again (H5). A resume
another one beat raises ``NotThisResume`` and must send nothing. Request id:
``google-adk/<conversation id>/<confirmation call id>`` (ADK makes one per question).
``close_confirmations`` closes a timed-out pause. ``ledger_guard``, the agent's
``before_tool_callback``, runs a confirmed call only where ``confirmations_for`` let it run:
ADK would otherwise act again on a confirmation saved in the session. See ``docs/hosts.md``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from google.adk.events import Event
from google.adk.flows.llm_flows.functions import REQUEST_CONFIRMATION_FUNCTION_CALL_NAME
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.tool_confirmation import ToolConfirmation
from google.adk.tools.tool_context import ToolContext
from google.genai import types

from ledger_agents import (
    DENIED,
    Action,
    ApprovalNotRecorded,
    Batch,
    Decision,
    InvalidAnswer,
    NotThisResume,
    acheck_all,
    aclose_all,
    adecide_all,
    check_all,
    close_all,
    decide_all,
    mint_all,
    require_bool,
    sync_only,
)

__all__ = [
    "CONFIRMATION",
    "ApprovalNotRecorded",
    "Decision",
    "InvalidAnswer",
    "NoGoAhead",
    "NotThisResume",
    "Outcome",
    "aclose_confirmations",
    "aconfirmations_for",
    "amint_confirmations",
    "close_confirmations",
    "confirmations_for",
    "ledger_guard",
    "mint_confirmations",
    "unanswered",
]

CONFIRMATION = REQUEST_CONFIRMATION_FUNCTION_CALL_NAME  # "adk_request_confirmation"


def unanswered(events: Iterable[Event]) -> list[types.FunctionCall]:
    """The confirmation calls in ``events`` that no user response answers yet (so a whole
    ``session.events`` mints only the open questions)."""
    events = list(events)
    answered = {
        response.id
        for event in events
        if event.author == "user"
        for response in event.get_function_responses()
        if response.name == CONFIRMATION
    }
    return [
        call
        for event in events
        for call in event.get_function_calls()
        if call.name == CONFIRMATION and call.id not in answered
    ]


def _minted(
    ledger: object, events: Iterable[Event], conversation_id: str
) -> dict[str, dict[str, object]]:
    call_ids: list[str] = []
    for call in unanswered(events):
        if not call.id:
            raise ValueError(f"a {CONFIRMATION} call without an id cannot be answered")
        call_ids.append(call.id)
    return mint_all(ledger, "google-adk", conversation_id, call_ids)


def mint_confirmations(
    ledger: object, events: Iterable[Event], *, conversation_id: str
) -> dict[str, dict[str, object]]:
    """A pending record per open confirmation, keyed by its call id; one already decided
    (closed by the host, or answered under a reused id) is marked ``"decided"``: do not
    ask the person about it (one ``is_spent`` per call; an async ledger:
    ``amint_confirmations``)."""
    sync_only(ledger, "amint_confirmations")
    return check_all(ledger, _minted(ledger, events, conversation_id))


async def amint_confirmations(
    ledger: object, events: Iterable[Event], *, conversation_id: str
) -> dict[str, dict[str, object]]:
    """:func:`mint_confirmations` for an async ledger (or a sync one)."""
    return await acheck_all(ledger, _minted(ledger, events, conversation_id))


Answer = bool | ToolConfirmation
ACCEPTED = "True, False or a ToolConfirmation"


@dataclass(frozen=True)
class Outcome:
    """``message``: the user ``types.Content`` to pass as ``runner.run_async(...,
    new_message=outcome.message)``, one ``adk_request_confirmation`` response per answered
    call, confirmed only where the ledger said RUN; or ``None`` with ``ask_again`` (H5: new
    pending records to persist, nothing spent: ask the person again) and its ``reason``.
    ``decisions``: confirmation call id -> :class:`Decision`."""

    message: types.Content | None
    ask_again: dict[str, dict[str, object]] = field(default_factory=dict)
    decisions: dict[str, Decision] = field(default_factory=dict)
    reason: str = ""


def _answers(answers: object) -> tuple[dict[str, bool], dict[str, object]]:
    """Read every answer before anything is spent: bools, and the person's own objects."""
    if not isinstance(answers, Mapping):
        raise InvalidAnswer(
            f"answers are a mapping {{confirmation call id: answer}}, not {type(answers).__name__}"
        )
    if not answers:
        raise InvalidAnswer(f"no answers given: {{call id: {ACCEPTED}}}, nothing was spent")
    read: dict[str, bool] = {}
    for call_id, answer in answers.items():
        try:
            own = answer.confirmed if isinstance(answer, ToolConfirmation) else answer
            read[call_id] = require_bool(own, ACCEPTED)
        except InvalidAnswer as exc:
            raise InvalidAnswer(f"call {call_id!r}: {exc}") from None
    return read, dict(answers)


def _confirmation(decision: Decision, own: object) -> ToolConfirmation:
    mine = own if isinstance(own, ToolConfirmation) else None
    if decision.action is Action.RUN:
        return mine or ToolConfirmation(confirmed=True)
    if decision.message == DENIED and mine is not None:
        return mine  # the person's own denial, with its payload
    return ToolConfirmation(confirmed=False)


# Confirmation call ids this process's confirmations_for let run and ledger_guard has not
# yet let through: a confirmed call runs once per RUN given here (one atomic set.remove
# takes a go-ahead, so threads and tasks cannot both take it).
_granted: set[str] = set()


def _outcome(batch: Batch, own: dict[str, object]) -> Outcome:
    if batch.ask_again:
        return Outcome(None, batch.ask_again, reason=batch.reason)
    _granted.update(call_id for call_id, decision in batch.decisions.items() if decision.run)
    parts = [
        types.Part(
            function_response=types.FunctionResponse(
                id=call_id,
                name=CONFIRMATION,
                response=_confirmation(decision, own.get(call_id)).model_dump(
                    mode="json", by_alias=True
                ),
            )
        )
        for call_id, decision in batch.decisions.items()
    ]
    return Outcome(types.Content(role="user", parts=parts), decisions=batch.decisions)


def confirmations_for(
    ledger: object,
    pending: Mapping[str, object],
    answers: Mapping[str, Answer],
    *,
    attempt_secret: bytes | str | None = None,
) -> Outcome:
    """Spend the person's answers ({confirmation call id: answer}); give the new message."""
    read, own = _answers(answers)
    return _outcome(decide_all(ledger, pending, read, attempt_secret=attempt_secret), own)


async def aconfirmations_for(
    ledger: object,
    pending: Mapping[str, object],
    answers: Mapping[str, Answer],
    *,
    attempt_secret: bytes | str | None = None,
) -> Outcome:
    """:func:`confirmations_for` with an async ledger (or a sync one)."""
    read, own = _answers(answers)
    batch = await adecide_all(ledger, pending, read, attempt_secret=attempt_secret)
    return _outcome(batch, own)


class NoGoAhead(RuntimeError):
    """A confirmed call reached the tool in a run that did not answer it through
    :func:`confirmations_for` in this process (a run of the session with no new message
    after a crash, say). Nothing ran, and nothing is recorded for the call, so the
    resume that holds the approval can still complete it (its attempt secret)."""


def _asked_by(tool_context: ToolContext) -> str:
    """The id of the latest confirmation call that asks about this tool call ("" if none)."""
    wanted = tool_context.function_call_id
    for event in reversed(tool_context.session.events):
        for call in event.get_function_calls():
            original = (call.args or {}).get("originalFunctionCall")
            about = original.get("id") if isinstance(original, Mapping) else None
            if call.name == CONFIRMATION and about == wanted and call.id:
                return call.id
    return ""


def ledger_guard(
    tool: BaseTool, args: dict[str, Any], tool_context: ToolContext
) -> dict[str, Any] | None:
    """A ``before_tool_callback`` (``LlmAgent(..., before_tool_callback=ledger_guard)``): a
    confirmed call runs only in the process whose :func:`confirmations_for` said RUN for it,
    once. ADK keeps a confirmation in the session and runs a confirmed call whose result is
    missing on any run that brings no new message; without the guard such a run (after a
    crash between the runner saving the answer and the tool's result) bypasses the ledger;
    with it, the run raises :class:`NoGoAhead`. Any other call passes (the first call of a
    tool goes on to ask for confirmation)."""
    confirmation = tool_context.tool_confirmation
    if confirmation is None or not confirmation.confirmed:
        return None
    asked = _asked_by(tool_context)
    try:
        _granted.remove(asked)
    except KeyError:  # raised, not answered: a result would close the question for good
        raise NoGoAhead(
            f"Not run: the confirmed call {tool_context.function_call_id!r} (confirmation"
            f" {asked!r}) has no decision ledger go-ahead in this process; resume through"
            " confirmations_for"
        ) from None
    return None


close_confirmations = close_all  # a timed-out pause: {call id: Closure}, proven where possible
aclose_confirmations = aclose_all
