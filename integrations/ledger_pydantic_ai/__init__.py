"""PydanticAI deferred tool approvals, decided at most once by a decision ledger.

A tool declared with ``requires_approval=True`` makes the run end with
``DeferredToolRequests``. Then::

    pending = mint_requests(ledger, result.output, conversation_id=conv)  # persist with
    # the message history (``ModelMessagesTypeAdapter``): plain JSON
    ...   # later, in any process, the person answers {tool_call_id: True/False}
    outcome = results_for(ledger, pending, answers, attempt_secret=secret)
    if outcome.ask_again:        # H5: the store changed: persist these and ask again
        ...
    else:
        agent.run(message_history=history, deferred_tool_results=outcome.results)

``results_for`` spends every answer before the run continues: a call the ledger lets
run becomes ``ToolApproved``, every other answer a ``ToolDenied`` with the reason for
the model; a resume that another one beat raises ``NotThisResume`` (do not continue the
run: the holder does). With ``attempt_secret``, the same resume attempt retried after
a crash gets ``ToolApproved`` again. Request id: ``pydantic-ai/<conversation id>/<tool
call id>``, where the conversation id is the host's stable id for the conversation
(for example the ``run_id`` of its first run). ``close_requests`` closes a timed-out
pause with a proof.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from pydantic_ai import DeferredToolRequests, DeferredToolResults, ToolApproved, ToolDenied

from ledger_agents import (
    Action,
    Batch,
    Decision,
    NotThisResume,
    aclose_all,
    adecide_all,
    close_all,
    decide_all,
    derive_request_id,
)
from ledger_core import mint

__all__ = [
    "Decision",
    "NotThisResume",
    "Outcome",
    "aclose_requests",
    "aresults_for",
    "close_requests",
    "mint_requests",
    "results_for",
]


def mint_requests(
    ledger: object, requests: DeferredToolRequests, *, conversation_id: str
) -> dict[str, dict[str, object]]:
    """A pending record per approval the run asks for, keyed by tool call id (no I/O)."""
    return {
        call.tool_call_id: mint(
            ledger, derive_request_id("pydantic-ai", conversation_id, call.tool_call_id)
        ).to_dict()
        for call in requests.approvals
    }


@dataclass(frozen=True)
class Outcome:
    """``results`` to pass back to the run, or ``ask_again`` (nothing was spent)."""

    results: DeferredToolResults | None
    ask_again: dict[str, dict[str, object]] = field(default_factory=dict)
    decisions: dict[str, Decision] = field(default_factory=dict)


def _outcome(batch: Batch) -> Outcome:
    if batch.ask_again:
        return Outcome(None, batch.ask_again)
    approvals: dict[str, ToolApproved | ToolDenied] = {
        call_id: ToolApproved() if d.action is Action.RUN else ToolDenied(d.message)
        for call_id, d in batch.decisions.items()
    }
    return Outcome(DeferredToolResults(approvals=dict(approvals)), {}, batch.decisions)


def results_for(
    ledger: object,
    pending: Mapping[str, object],
    answers: Mapping[str, bool],
    *,
    attempt_secret: bytes | str | None = None,
) -> Outcome:
    """Spend the person's answers ({tool call id: approved}) and build the run's results."""
    return _outcome(decide_all(ledger, pending, answers, attempt_secret=attempt_secret))


async def aresults_for(
    ledger: object,
    pending: Mapping[str, object],
    answers: Mapping[str, bool],
    *,
    attempt_secret: bytes | str | None = None,
) -> Outcome:
    """:func:`results_for` with an async ledger (or a sync one)."""
    batch = await adecide_all(ledger, pending, answers, attempt_secret=attempt_secret)
    return _outcome(batch)


close_requests = close_all  # a timed-out pause: {call id: Closure}, proven where possible
aclose_requests = aclose_all
