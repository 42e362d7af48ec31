"""OpenAI Agents SDK tool approvals (``needs_approval``), decided at most once.

``mint_interruptions`` turns a run's ``result.interruptions`` into pending records
(plain JSON, saved beside the serialized ``RunState``; one whose request was spent
before the question, by a reused conversation and call id, is marked ``"decided"``: do
not ask it, ``apply_answers`` rejects it); ``apply_answers`` spends every
answer first, then calls ``state.approve`` only for the calls the ledger lets run and
``state.reject`` for the others, or asks again (H5). A resume another one beat raises
``NotThisResume``. Request id: ``openai-agents/<conversation id>/<call_id>``.
``close_interruptions`` closes a timed-out pause. See ``docs/hosts.md``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from agents import RunState, ToolApprovalItem

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
    sync_only,
)

__all__ = [
    "ApprovalNotRecorded",
    "Decision",
    "InvalidAnswer",
    "NotThisResume",
    "Outcome",
    "aapply_answers",
    "aclose_interruptions",
    "amint_interruptions",
    "apply_answers",
    "call_id_of",
    "close_interruptions",
    "mint_interruptions",
]


def call_id_of(item: ToolApprovalItem) -> str:
    """The model's call id of an interruption (stable in the serialized run state)."""
    raw = item.raw_item
    call_id = raw.get("call_id") if isinstance(raw, dict) else getattr(raw, "call_id", None)
    if not isinstance(call_id, str) or not call_id:
        raise ValueError(f"interruption for {item.tool_name!r} has no call_id")
    return call_id


def _minted(
    ledger: object, interruptions: Iterable[ToolApprovalItem], conversation_id: str
) -> dict[str, dict[str, object]]:
    return mint_all(ledger, "openai-agents", conversation_id, map(call_id_of, interruptions))


def mint_interruptions(
    ledger: object, interruptions: Iterable[ToolApprovalItem], *, conversation_id: str
) -> dict[str, dict[str, object]]:
    """A pending record per interruption, keyed by call id; one already decided (a reused
    conversation and call id) is marked ``"decided"``: do not ask the person about it
    (one ``is_spent`` per call; an async ledger: ``amint_interruptions``)."""
    sync_only(ledger, "amint_interruptions")
    return check_all(ledger, _minted(ledger, interruptions, conversation_id))


async def amint_interruptions(
    ledger: object, interruptions: Iterable[ToolApprovalItem], *, conversation_id: str
) -> dict[str, dict[str, object]]:
    """:func:`mint_interruptions` for an async ledger (or a sync one)."""
    return await acheck_all(ledger, _minted(ledger, interruptions, conversation_id))


@dataclass(frozen=True)
class Outcome:
    """``applied``: at least one answer was recorded in the state (approved or rejected;
    ``decisions`` says which), so ``Runner.run(agent, state)`` continues; else
    ``ask_again`` (H5: new pending records to persist, nothing spent) and its ``reason``."""

    applied: bool
    ask_again: dict[str, dict[str, object]] = field(default_factory=dict)
    decisions: dict[str, Decision] = field(default_factory=dict)
    reason: str = ""


def _apply(state: RunState[Any, Any], batch: Batch) -> Outcome:
    if batch.ask_again:
        return Outcome(False, batch.ask_again, reason=batch.reason)
    items = {call_id_of(item): item for item in state.get_interruptions()}
    for call_id, decision in batch.decisions.items():
        item = items[call_id]
        if decision.action is Action.RUN:
            state.approve(item)
        else:
            state.reject(item, rejection_message=decision.message)
    return Outcome(bool(batch.decisions), {}, batch.decisions)


def apply_answers(
    ledger: object,
    state: RunState[Any, Any],
    pending: Mapping[str, object],
    answers: Mapping[str, bool],
    *,
    attempt_secret: bytes | str | None = None,
) -> Outcome:
    """Spend the person's answers ({call id: approved}) and record them in ``state``."""
    _check_calls(state, answers)
    batch = decide_all(ledger, pending, answers, attempt_secret=attempt_secret)
    return _apply(state, batch)


async def aapply_answers(
    ledger: object,
    state: RunState[Any, Any],
    pending: Mapping[str, object],
    answers: Mapping[str, bool],
    *,
    attempt_secret: bytes | str | None = None,
) -> Outcome:
    """:func:`apply_answers` with an async ledger (or a sync one)."""
    _check_calls(state, answers)
    batch = await adecide_all(ledger, pending, answers, attempt_secret=attempt_secret)
    return _apply(state, batch)


def _check_calls(state: RunState[Any, Any], answers: Mapping[str, bool]) -> None:
    """Refuse, before spending anything, answers for calls this state is not waiting on
    (an empty mapping is refused with the others' rule: ``InvalidAnswer``)."""
    if not isinstance(answers, Mapping):
        return  # refused by the batch, with the others' InvalidAnswer
    waiting = {call_id_of(item) for item in state.get_interruptions()}
    unknown = set(answers) - waiting
    if unknown:
        raise KeyError(f"the run state is not waiting on calls {sorted(unknown)}")


close_interruptions = close_all  # a timed-out pause: {call id: Closure}, proven where possible
aclose_interruptions = aclose_all
