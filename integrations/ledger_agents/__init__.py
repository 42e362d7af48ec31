"""What every agent-host integration shares: request ids, attempt keys, verdict -> action.

A framework integration (``ledger_langgraph``, ``ledger_pydantic_ai``,
``ledger_openai_agents``) does three things with these: mint a :class:`PendingRequest`
before the run pauses and persist its dict form with the paused run; when a person
answers, :func:`decide` (or :func:`adecide`) spends it and says whether the tool may run,
must be refused with a message, or must be asked again; when a pause times out,
``close_pause`` proves the call never ran.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from urllib.parse import quote

from ledger_core import (
    AsyncMarkerReentry,
    Closure,
    LedgerError,
    LedgerUnavailable,
    MarkerReentry,
    PendingRequest,
    Resolution,
    ResolveVerdict,
    attempt_key,
    can_reenter,
    close_pause,
    close_pause_async,
    is_async_ledger,
    mint,
    resolve,
    resolve_async,
    store_id_of,
)
from ledger_core.ids import MAX_ID_BYTES

__all__ = [
    "Action",
    "ApprovalNotRecorded",
    "Batch",
    "Decision",
    "InvalidAnswer",
    "NotThisResume",
    "aclose_all",
    "adecide",
    "adecide_all",
    "close_all",
    "decide",
    "decide_all",
    "derive_request_id",
    "mint_all",
    "reentrant",
    "require_bool",
]


def mint_all(
    ledger: object, framework: str, conversation_id: str, call_ids: Iterable[str]
) -> dict[str, dict[str, object]]:
    """A pending record (its dict form) per paused call of one conversation, keyed by
    call id (no I/O)."""
    return {
        call_id: mint(ledger, derive_request_id(framework, conversation_id, call_id)).to_dict()
        for call_id in call_ids
    }


def derive_request_id(framework: str, *parts: str) -> str:
    """The request id of one paused tool call, stable across processes and versions:
    ``framework/part/...``, each part percent-encoded (distinct parts, distinct ids); one
    over 1024 UTF-8 bytes becomes ``framework/sha256/<hex of the full id>``."""
    if not parts or not all(isinstance(p, str) and p for p in parts):
        raise ValueError("a request id needs non-empty string parts (thread id, tool call id)")
    full = "/".join([framework, *(quote(p, safe="") for p in parts)])
    if len(full.encode("utf-8")) <= MAX_ID_BYTES:
        return full
    return f"{framework}/sha256/{hashlib.sha256(full.encode('utf-8')).hexdigest()}"


class Action(enum.Enum):
    """What the host does with a person's answer once the ledger has spoken."""

    RUN = "run"  # the answer approved and this attempt holds the decision
    REFUSE = "refuse"  # do not run; tell the model/person `Decision.message`
    ASK_AGAIN = "ask-again"  # H5: minted under another store; mint anew and ask the person


_MESSAGES = {
    ResolveVerdict.ALREADY_SPENT: (
        "Not run: this approval was already answered (approved or denied) by another resume."
    ),
    ResolveVerdict.CLOSED_BY_HOST: "Not run: the host closed this approval after it timed out.",
    ResolveVerdict.REFUSED_INVALID: "Not run: the decision ledger gave an invalid answer.",
    ResolveVerdict.FAILED_COUNTS_AS_SPENT: (
        "Not run: the decision ledger failed and this approval may have been used."
    ),
    ResolveVerdict.LEDGER_CHANGED: "The decision ledger changed since the question: asking again.",
}
# What a host can do when no live resume holds the approval (the holder crashed).
RECOVERY = (
    " If that resume crashed: retry it with its attempt secret (it re-enters and completes);"
    " without one, close the pause (close_thread / close_requests / close_interruptions /"
    " close_confirmations / close_approvals: it"
    " says possibly-run, since the tool may have started) and ask the person again as a new"
    " request (a new tool call id)."
)
DENIED = "The person denied this call."


@dataclass(frozen=True)
class Decision:
    action: Action
    message: str
    resolution: Resolution

    @property
    def run(self) -> bool:
        return self.action is Action.RUN


# Verdicts that say another resume holds (or may hold) the decision. Such a resume must
# not continue the run: whatever it saved (a checkpoint, a message history, a run state)
# could overwrite the holder's, so it raises and leaves the paused run as it is.
NOT_OURS = frozenset(
    {
        ResolveVerdict.ALREADY_SPENT,
        ResolveVerdict.FAILED_COUNTS_AS_SPENT,
        ResolveVerdict.REFUSED_INVALID,
    }
)


class NotThisResume(RuntimeError):
    """This resume does not hold the approval: another one does (or may). Nothing ran;
    leave the paused run to the holder; the message says what to do if it crashed.
    (A RuntimeError, so a framework's default retry policy does not retry it.)"""

    def __init__(self, decision: Decision) -> None:
        super().__init__(decision.message + RECOVERY)
        self.decision = decision


class InvalidAnswer(LedgerError, TypeError):
    """An answer that is not one of the accepted forms: refused before anything is spent,
    so the person can still answer (a ``"yes"`` must not be spent as a denial)."""


def require_bool(answer: object, accepted: str = "True (approve) or False (deny)") -> bool:
    """``answer`` when it is exactly ``True`` or ``False``; else :class:`InvalidAnswer`."""
    if type(answer) is bool:
        return answer
    shown = repr(answer)
    shown = shown if len(shown) <= 80 else shown[:77] + "..."
    raise InvalidAnswer(
        f"an answer must be {accepted}, not {type(answer).__name__} {shown}; nothing was spent"
    )


def checked(decision: Decision) -> Decision:
    """Raise :class:`NotThisResume` for a verdict that another resume holds the call."""
    if decision.resolution.verdict in NOT_OURS:
        raise NotThisResume(decision)
    return decision


class ApprovalNotRecorded(LedgerUnavailable):
    """H2: the spend failed and did not land; the pause stays answerable (resume again)."""


def reentrant(ledger: object) -> object:
    """The ledger with re-entry (C10): itself when it has ``spend_as``, else wrapped in
    ``MarkerReentry`` when it has markers, else itself (no re-entry, as before)."""
    if can_reenter(ledger) or not callable(getattr(ledger, "spend_marker", None)):
        return ledger
    return AsyncMarkerReentry(ledger) if is_async_ledger(ledger) else MarkerReentry(ledger)


def _key(pending: PendingRequest, secret: bytes | str | None) -> str | None:
    return None if secret is None else attempt_key(pending, secret)


def changed_reason(asked_under: str | None, current: str | None) -> str:
    """Why a pause is asked again (H5), naming both stores."""
    return (
        f"asked under store {asked_under!r}, the ledger is now store {current!r}: nothing was"
        " spent; ask the person again (a request runs at most once per store)"
    )


def _decision(resolution: Resolution, approved: bool, reason: str) -> Decision:
    verdict = resolution.verdict
    if verdict is ResolveVerdict.RUN:
        if approved:
            return Decision(Action.RUN, "", resolution)
        return Decision(Action.REFUSE, DENIED, resolution)  # a denial is spent too: once
    if verdict is ResolveVerdict.FAILED_NOT_LANDED:
        raise ApprovalNotRecorded(
            "the decision ledger failed before recording the answer; answer again"
        ) from resolution.error
    if verdict is ResolveVerdict.LEDGER_CHANGED:
        return Decision(Action.ASK_AGAIN, f"{_MESSAGES[verdict]} ({reason})", resolution)
    return Decision(Action.REFUSE, _MESSAGES[verdict], resolution)


def decide(
    ledger: object,
    pending: PendingRequest,
    approved: bool,
    *,
    attempt_secret: bytes | str | None = None,
) -> Decision:
    """Spend a person's answer (approval or denial) and map the verdict to an action.

    With ``attempt_secret`` (this resume attempt's only) the same attempt, retried, gets
    ``RUN`` again. Raises :class:`InvalidAnswer` (nothing spent) unless ``approved`` is a
    bool, and :class:`ApprovalNotRecorded` when the spend failed without landing.
    """
    answer = require_bool(approved)
    key = _key(pending, attempt_secret)
    target = reentrant(ledger) if key is not None else ledger
    reason = changed_reason(pending.store_id, store_id_of(ledger))
    return _decision(resolve(target, pending, attempt_key=key), answer, reason)


async def adecide(
    ledger: object,
    pending: PendingRequest,
    approved: bool,
    *,
    attempt_secret: bytes | str | None = None,
) -> Decision:
    """:func:`decide` for an async ledger (or a sync one)."""
    answer = require_bool(approved)
    key = _key(pending, attempt_secret)
    target = reentrant(ledger) if key is not None else ledger
    resolution = await resolve_async(target, pending, attempt_key=key)
    return _decision(resolution, answer, changed_reason(pending.store_id, store_id_of(ledger)))


@dataclass(frozen=True)
class Batch:
    """The answers to one paused run's approvals, keyed by tool call id: ``decisions``
    for every answered call, or else ``ask_again`` (H5: nothing was spent; persist these
    new pending records and ask the person again)."""

    decisions: dict[str, Decision] = field(default_factory=dict)
    ask_again: dict[str, dict[str, object]] = field(default_factory=dict)
    reason: str = ""  # why ask_again: both store ids


def _parse(
    ledger: object, records: Mapping[str, object], answers: Mapping[str, bool]
) -> tuple[dict[str, PendingRequest], Batch | None]:
    """Every check a batch can make, before anything is spent; and the batch that asks
    again (H5) when any answered call was minted under another store."""
    if not isinstance(answers, Mapping):
        raise InvalidAnswer(
            f"answers are a mapping {{call id: bool}}, not {type(answers).__name__}"
        )
    for call_id, answer in answers.items():
        try:
            require_bool(answer)
        except InvalidAnswer as exc:
            raise InvalidAnswer(f"call {call_id!r}: {exc}") from None
    unknown = set(answers) - set(records)
    if unknown:
        raise KeyError(f"answers for calls that were never minted: {sorted(unknown)}")
    pending = {call_id: PendingRequest.from_dict(records[call_id]) for call_id in answers}
    current = store_id_of(ledger)
    moved = {call_id: p for call_id, p in pending.items() if p.store_id != current}
    if not moved:
        return pending, None
    again = {call_id: mint(ledger, p.request_id).to_dict() for call_id, p in moved.items()}
    asked = next(iter(moved.values())).store_id
    return pending, Batch(ask_again=again, reason=changed_reason(asked, current))


def _finish(decisions: dict[str, Decision]) -> Batch:
    for decision in decisions.values():
        checked(decision)
    return Batch(decisions=decisions)


def decide_all(
    ledger: object,
    records: Mapping[str, object],
    answers: Mapping[str, bool],
    *,
    attempt_secret: bytes | str | None = None,
) -> Batch:
    """Spend every answer of one paused run (``records``: tool call id -> pending dict).

    Asks again, spending nothing, when any of them was minted under another store; raises
    :class:`NotThisResume` when another resume holds any of them.
    """
    pending, changed = _parse(ledger, records, answers)
    if changed is not None:
        return changed
    return _finish(
        {
            call_id: decide(ledger, p, answers[call_id], attempt_secret=attempt_secret)
            for call_id, p in pending.items()
        }
    )


async def adecide_all(
    ledger: object,
    records: Mapping[str, object],
    answers: Mapping[str, bool],
    *,
    attempt_secret: bytes | str | None = None,
) -> Batch:
    """:func:`decide_all` for an async ledger (or a sync one)."""
    pending, changed = _parse(ledger, records, answers)
    if changed is not None:
        return changed
    return _finish(
        {
            call_id: await adecide(ledger, p, answers[call_id], attempt_secret=attempt_secret)
            for call_id, p in pending.items()
        }
    )


def close_all(ledger: object, records: Mapping[str, object]) -> dict[str, Closure]:
    """A pause timed out: close each pending record (keyed by tool call id) with a proof
    where the ledger can give one (H3, H4)."""
    return {
        call_id: close_pause(ledger, PendingRequest.from_dict(record))
        for call_id, record in records.items()
    }


async def aclose_all(ledger: object, records: Mapping[str, object]) -> dict[str, Closure]:
    """:func:`close_all` for an async ledger (or a sync one)."""
    return {
        call_id: await close_pause_async(ledger, PendingRequest.from_dict(record))
        for call_id, record in records.items()
    }
