"""Microsoft Agent Framework function approvals, decided at most once by a decision ledger.

A tool with ``approval_mode="always_require"`` pauses the run: ``result.user_input_requests``
holds a ``function_approval_request`` per call. ``mint_approvals`` turns them into pending
records (plain JSON, persisted beside ``session.to_dict()``; each keeps its request), keyed
by the request's id; ``responses_for`` spends the person's answers (``True``/``False`` or
the framework's own ``function_approval_response``; anything else is refused before
anything is spent) and returns an :class:`Outcome` whose ``message`` is the next run's
input (approved only for the calls the ledger lets run), or asks again (H5). A resume
another one beat raises ``NotThisResume`` and must run nothing. Request id:
``agent-framework/<conversation id>/<approval request id>`` (one per call occurrence).
``close_approvals`` closes a timed-out pause. See ``docs/hosts.md``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from agent_framework import Content, Message

from ledger_agents import (
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
    "ApprovalNotRecorded",
    "Decision",
    "InvalidAnswer",
    "NotThisResume",
    "Outcome",
    "aclose_approvals",
    "amint_approvals",
    "aresponses_for",
    "close_approvals",
    "mint_approvals",
    "responses_for",
]

REQUEST = "function_approval_request"
RESPONSE = "function_approval_response"
RECORD_KEY = "approval_request"  # the framework's request, kept in its pending record


def mint_approvals(
    ledger: object, requests: Iterable[Content], *, conversation_id: str
) -> dict[str, dict[str, object]]:
    """A pending record per function approval request (other input requests are not
    approvals and are skipped), keyed by the request's id; one already decided is marked
    ``"decided"``: do not ask the person about it (one ``is_spent`` per call; an async
    ledger: ``amint_approvals``)."""
    sync_only(ledger, "amint_approvals")
    return check_all(ledger, _minted(ledger, requests, conversation_id))


async def amint_approvals(
    ledger: object, requests: Iterable[Content], *, conversation_id: str
) -> dict[str, dict[str, object]]:
    """:func:`mint_approvals` for an async ledger (or a sync one)."""
    return await acheck_all(ledger, _minted(ledger, requests, conversation_id))


def _minted(
    ledger: object, requests: Iterable[Content], conversation_id: str
) -> dict[str, dict[str, object]]:
    asked: dict[str, Content] = {}
    for request in requests:
        if request.type != REQUEST:
            continue
        if not isinstance(request.id, str) or not request.id:
            raise ValueError("a function approval request without an id cannot be answered")
        asked[request.id] = request
    records = mint_all(ledger, "agent-framework", conversation_id, asked)
    return {rid: {**record, RECORD_KEY: asked[rid].to_dict()} for rid, record in records.items()}


Answer = bool | Content
ACCEPTED = "True, False or a function_approval_response Content"


def _read(request_id: str, answer: object) -> bool:
    if not isinstance(answer, Content):
        return require_bool(answer, ACCEPTED)
    if answer.type != RESPONSE:
        raise InvalidAnswer(f"a {answer.type} is not {ACCEPTED}; nothing was spent")
    if answer.id != request_id:
        raise InvalidAnswer(f"it answers request {answer.id!r}, not this one; nothing was spent")
    return require_bool(answer.approved, ACCEPTED)


def _answers(answers: object) -> dict[str, bool]:
    """Every answer read before anything is spent; a list of the framework's responses is
    keyed by their ids."""
    if isinstance(answers, (list, tuple)) and all(isinstance(a, Content) for a in answers):
        answers = {a.id: a for a in answers}
    if not isinstance(answers, Mapping):
        raise InvalidAnswer(
            f"answers are a mapping {{approval request id: answer}} or a list of "
            f"function_approval_response Contents, not {type(answers).__name__}"
        )
    if not answers:
        raise InvalidAnswer(f"no answers given: {{request id: {ACCEPTED}}}, nothing was spent")
    read: dict[str, bool] = {}
    for request_id, answer in answers.items():
        try:
            read[request_id] = _read(request_id, answer)
        except InvalidAnswer as exc:
            raise InvalidAnswer(f"request {request_id!r}: {exc}") from None
    return read


@dataclass(frozen=True)
class Outcome:
    """``message``: the user ``Message`` for ``agent.run(outcome.message, session=...)``,
    one ``function_approval_response`` per answered request, approved only where the
    ledger said RUN (``responses``: the same contents); or ``None`` with ``ask_again`` (H5:
    new pending records to persist, nothing spent: ask the person again) and its
    ``reason``. ``decisions``: approval request id -> :class:`Decision`."""

    message: Message | None
    responses: list[Content] = field(default_factory=list)
    ask_again: dict[str, dict[str, object]] = field(default_factory=dict)
    decisions: dict[str, Decision] = field(default_factory=dict)
    reason: str = ""


def _request(record: object) -> Content:
    stored = record.get(RECORD_KEY) if isinstance(record, Mapping) else None
    if not isinstance(stored, Mapping):
        raise LookupError(f"a pending record without its {RECORD_KEY!r}: mint it anew")
    return Content.from_dict(stored)


def _requests(pending: Mapping[str, object], read: Mapping[str, bool]) -> dict[str, Content]:
    """The framework's request of every answered record, read before anything is spent
    (an id that was never minted is left to the batch, which refuses it)."""
    return {rid: _request(pending[rid]) for rid in read if rid in pending}


def _outcome(batch: Batch, requests: Mapping[str, Content]) -> Outcome:
    if batch.ask_again:  # the new records keep the framework's request
        again = {
            rid: {**record, RECORD_KEY: requests[rid].to_dict()}
            for rid, record in batch.ask_again.items()
        }
        return Outcome(None, ask_again=again, reason=batch.reason)
    responses = [
        requests[rid].to_function_approval_response(decision.action is Action.RUN)
        for rid, decision in batch.decisions.items()
    ]
    return Outcome(Message(role="user", contents=responses), responses, decisions=batch.decisions)


def responses_for(
    ledger: object,
    pending: Mapping[str, object],
    answers: Mapping[str, Answer] | list[Content],
    *,
    attempt_secret: bytes | str | None = None,
) -> Outcome:
    """Spend the person's answers ({approval request id: answer}); give the next input."""
    read = _answers(answers)
    requests = _requests(pending, read)
    return _outcome(decide_all(ledger, pending, read, attempt_secret=attempt_secret), requests)


async def aresponses_for(
    ledger: object,
    pending: Mapping[str, object],
    answers: Mapping[str, Answer] | list[Content],
    *,
    attempt_secret: bytes | str | None = None,
) -> Outcome:
    """:func:`responses_for` with an async ledger (or a sync one)."""
    read = _answers(answers)
    requests = _requests(pending, read)
    batch = await adecide_all(ledger, pending, read, attempt_secret=attempt_secret)
    return _outcome(batch, requests)


close_approvals = close_all  # a timed-out pause: {request id: Closure}, proven where possible
aclose_approvals = aclose_all
