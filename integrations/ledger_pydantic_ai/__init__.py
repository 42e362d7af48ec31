"""PydanticAI deferred tool approvals, decided at most once by a decision ledger.

``mint_requests`` turns a run's ``DeferredToolRequests`` into pending records (plain
JSON, persisted with the message history; a call whose request was spent before the
question, by a reused conversation and tool call id, is marked ``"decided"``: do not ask
it, the results refuse it); ``results_for`` spends the person's answers
(``True``/``False``, ``ToolApproved``, ``ToolDenied`` or a ``DeferredToolResults``;
anything else is refused before anything is spent) and returns an :class:`Outcome`,
which *is* the next run's ``DeferredToolResults``, or asks again (H5). A resume another
one beat raises ``NotThisResume``. Request id: ``pydantic-ai/<conversation id>/<tool
call id>``. ``close_requests`` closes a timed-out pause. See ``docs/hosts.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai import DeferredToolRequests, DeferredToolResults, ToolApproved, ToolDenied

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
    "ApprovalNotRecorded",
    "Decision",
    "InvalidAnswer",
    "NotThisResume",
    "Outcome",
    "aclose_requests",
    "amint_requests",
    "aresults_for",
    "close_requests",
    "mint_requests",
    "results_for",
]


def _minted(
    ledger: object, requests: DeferredToolRequests, conversation_id: str
) -> dict[str, dict[str, object]]:
    call_ids = (call.tool_call_id for call in requests.approvals)
    return mint_all(ledger, "pydantic-ai", conversation_id, call_ids)


def mint_requests(
    ledger: object, requests: DeferredToolRequests, *, conversation_id: str
) -> dict[str, dict[str, object]]:
    """A pending record per approval the run asks for, keyed by tool call id; one already
    decided (a reused conversation and tool call id) is marked ``"decided"``: do not ask
    the person about it (one ``is_spent`` per call; an async ledger: ``amint_requests``)."""
    sync_only(ledger, "amint_requests")
    return check_all(ledger, _minted(ledger, requests, conversation_id))


async def amint_requests(
    ledger: object, requests: DeferredToolRequests, *, conversation_id: str
) -> dict[str, dict[str, object]]:
    """:func:`mint_requests` for an async ledger (or a sync one)."""
    return await acheck_all(ledger, _minted(ledger, requests, conversation_id))


Answer = bool | ToolApproved | ToolDenied
ACCEPTED = "True, False, ToolApproved() or ToolDenied(message)"


@dataclass(kw_only=True)
class Outcome(DeferredToolResults):
    """The ``DeferredToolResults`` for the next run (pass it as ``deferred_tool_results``),
    plus ``ask_again`` (H5: new pending records to persist; nothing was spent, and
    ``approvals`` is empty: ask the person again, do not run) with its ``reason``, and
    the ledger's ``decisions`` (tool call id -> :class:`Decision`)."""

    ask_again: dict[str, dict[str, object]] = field(default_factory=dict)
    reason: str = ""
    decisions: dict[str, Decision] = field(default_factory=dict)

    @property
    def results(self) -> DeferredToolResults | None:
        """Itself, or ``None`` when asking again (the older spelling)."""
        return None if self.ask_again else self


def _as_bool(answer: object) -> bool:
    if isinstance(answer, (ToolApproved, ToolDenied)):
        return isinstance(answer, ToolApproved)
    return require_bool(answer, ACCEPTED)


def _answers(answers: object) -> tuple[dict[str, bool], dict[str, Any], DeferredToolResults | None]:
    """Read every answer (before anything is spent): bools, and the person's own objects."""
    given = answers if isinstance(answers, DeferredToolResults) else None
    raw = given.approvals if given is not None else answers
    if not isinstance(raw, Mapping):
        raise InvalidAnswer(
            f"answers are a mapping {{tool call id: answer}} or a DeferredToolResults, "
            f"not {type(answers).__name__}"
        )
    read: dict[str, bool] = {}
    for call_id, answer in raw.items():
        try:
            read[call_id] = _as_bool(answer)
        except InvalidAnswer as exc:
            raise InvalidAnswer(f"call {call_id!r}: {exc}") from None
    return read, dict(raw), given


def _approval(decision: Decision, own: object) -> ToolApproved | ToolDenied:
    if decision.action is Action.RUN:
        return own if isinstance(own, ToolApproved) else ToolApproved()
    if decision.message == DENIED and isinstance(own, ToolDenied):
        return own  # the person's own message to the model
    return ToolDenied(decision.message)


def _outcome(batch: Batch, own: dict[str, Any], given: DeferredToolResults | None) -> Outcome:
    if batch.ask_again:
        return Outcome(ask_again=batch.ask_again, reason=batch.reason)
    approvals: dict[str, Any] = {
        call_id: _approval(d, own.get(call_id)) for call_id, d in batch.decisions.items()
    }
    outcome = Outcome(approvals=approvals, decisions=batch.decisions)
    if given is not None:  # the rest of a DeferredToolResults the person's side built
        outcome.calls.update(given.calls)
        outcome.metadata.update(given.metadata)
    return outcome


def results_for(
    ledger: object,
    pending: Mapping[str, object],
    answers: Mapping[str, Answer] | DeferredToolResults,
    *,
    attempt_secret: bytes | str | None = None,
) -> Outcome:
    """Spend the person's answers ({tool call id: answer}) and give the run's results."""
    read, own, given = _answers(answers)
    batch = decide_all(ledger, pending, read, attempt_secret=attempt_secret)
    return _outcome(batch, own, given)


async def aresults_for(
    ledger: object,
    pending: Mapping[str, object],
    answers: Mapping[str, Answer] | DeferredToolResults,
    *,
    attempt_secret: bytes | str | None = None,
) -> Outcome:
    """:func:`results_for` with an async ledger (or a sync one)."""
    read, own, given = _answers(answers)
    batch = await adecide_all(ledger, pending, read, attempt_secret=attempt_secret)
    return _outcome(batch, own, given)


close_requests = close_all  # a timed-out pause: {call id: Closure}, proven where possible
aclose_requests = aclose_all
