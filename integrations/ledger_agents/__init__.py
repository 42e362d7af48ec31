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
from collections.abc import Callable, Generator, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast
from urllib.parse import quote

from ledger_core import (
    AsyncMarkerReentry,
    Closure,
    InvalidAnswer,
    LedgerError,
    LedgerUnavailable,
    MarkerReentry,
    PendingRequest,
    Resolution,
    ResolveVerdict,
    already_decided,
    already_decided_async,
    attempt_key,
    can_reenter,
    close_pause,
    close_pause_async,
    is_async_ledger,
    mint,
    new_attempt_secret,
    resolve,
    resolve_async,
    store_id_of,
)
from ledger_core.host import require_answer
from ledger_core.ids import MAX_ID_BYTES
from ledger_core.steps import run_steps, run_steps_async

__all__ = [
    "DECIDED_BEFORE",
    "Action",
    "ApprovalNotRecorded",
    "Batch",
    "BatchNeedsReentry",
    "Decision",
    "InvalidAnswer",
    "NotThisResume",
    "acheck_all",
    "aclose_all",
    "adecide",
    "adecide_all",
    "check_all",
    "close_all",
    "decide",
    "decide_all",
    "decided_before",
    "decided_in",
    "derive_request_id",
    "mint_all",
    "reentrant",
    "require_bool",
    "sync_only",
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
# A request spent before its question was asked (a reused thread or conversation id with
# the same tool call id): no answer could count, so the person is not asked.
DECIDED_BEFORE = (
    "Not run: this request was already decided before this question (the same conversation"
    " and tool call id were answered or closed earlier); nothing was asked or spent: ask"
    " again as a new request (a new tool call id)."
)
DECIDED_KEY = "decided"  # in a pending record: the verdict found before the question


@dataclass(frozen=True)
class Decision:
    action: Action
    message: str
    resolution: Resolution

    @property
    def run(self) -> bool:
        """This call's approval was spent here: run the tool (once)."""
        return self.action is Action.RUN

    @property
    def decided_here(self) -> bool:
        """This call's answer (approval or denial) is the one the ledger recorded."""
        return self.resolution.decided_here


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

    def __init__(self, decision: Decision, recovery: str = RECOVERY) -> None:
        super().__init__(decision.message + recovery)
        self.decision = decision


def require_bool(answer: object, accepted: str = "True (approve) or False (deny)") -> bool:
    """``answer`` when it is exactly ``True`` or ``False``; else :class:`InvalidAnswer`."""
    return require_answer(answer, accepted)


def checked(decision: Decision) -> Decision:
    """Raise :class:`NotThisResume` for a verdict that another resume holds the call."""
    if decision.resolution.verdict in NOT_OURS:
        raise NotThisResume(decision)
    return decision


class ApprovalNotRecorded(LedgerUnavailable):
    """The answers were not (all) recorded and nothing ran: the pause stays answerable by
    a retry (H2). ``attempt_secret``, when set, is the secret the failed attempt spent
    under: the retry presents it (``attempt_secret=error.attempt_secret``) to take back
    the calls it recorded before the failure (``recorded``, tool call ids); a retry
    without it finds them answered. Kept out of the message and the repr."""

    def __init__(
        self,
        message: str,
        *,
        attempt_secret: bytes | str | None = None,
        recorded: Iterable[str] = (),
    ) -> None:
        super().__init__(message)
        self.attempt_secret = attempt_secret
        self.recorded = tuple(recorded)


class BatchNeedsReentry(LedgerError):
    """A batch of several answers on a ledger without re-entry (no ``spend_as``, no
    markers): one that failed part way could not be taken back by a retry, so it is
    refused before anything is spent (fail closed)."""


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


def _decision(resolution: Resolution, reason: str) -> Decision:
    verdict = resolution.verdict
    if verdict is ResolveVerdict.RUN:
        return Decision(Action.RUN, "", resolution)
    if verdict is ResolveVerdict.DENIED:
        return Decision(Action.REFUSE, DENIED, resolution)  # a denial is spent too: once
    if verdict is ResolveVerdict.FAILED_NOT_LANDED:
        raise ApprovalNotRecorded(
            "the decision ledger failed before recording the answer; answer again"
        ) from resolution.error
    if verdict is ResolveVerdict.LEDGER_CHANGED:
        return Decision(Action.ASK_AGAIN, f"{_MESSAGES[verdict]} ({reason})", resolution)
    return Decision(Action.REFUSE, _MESSAGES[verdict], resolution)


def decided_before(resolution: Resolution) -> Decision:
    """The refusal for a request found spent before its question (no answer counts)."""
    if resolution.verdict is ResolveVerdict.CLOSED_BY_HOST:
        return Decision(Action.REFUSE, _MESSAGES[ResolveVerdict.CLOSED_BY_HOST], resolution)
    return Decision(Action.REFUSE, DECIDED_BEFORE, resolution)


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
    return _decision(resolve(target, pending, approved=answer, attempt_key=key), reason)


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
    resolution = await resolve_async(target, pending, approved=answer, attempt_key=key)
    return _decision(resolution, changed_reason(pending.store_id, store_id_of(ledger)))


@dataclass(frozen=True)
class Batch:
    """The answers to one paused run's approvals, keyed by tool call id: ``decisions``
    for every answered call (and every call decided before its question), or else
    ``ask_again`` (H5: nothing was spent; persist these new pending records and ask the
    person again)."""

    decisions: dict[str, Decision] = field(default_factory=dict)
    ask_again: dict[str, dict[str, object]] = field(default_factory=dict)
    reason: str = ""  # why ask_again: both store ids


# A batch is written once as steps (as the core's host rules are) and driven by a sync or
# an async runner, so the two can never decide differently (C9). A step asks either
# "was this spent before its question?" (a PendingRequest) or "spend this answer".
@dataclass(frozen=True)
class _Spend:
    pending: PendingRequest
    approved: bool
    key: str | None


_Op = PendingRequest | _Spend
_R = TypeVar("_R")
_Steps = Generator[_Op, Any, _R]


def _performer(ledger: object, target: object) -> Callable[[_Op], object]:
    def perform(op: _Op) -> object:
        if isinstance(op, PendingRequest):
            return already_decided(ledger, op)
        return resolve(target, op.pending, approved=op.approved, attempt_key=op.key)

    return perform


def _async_performer(ledger: object, target: object) -> Callable[[_Op], Any]:
    async def perform(op: _Op) -> object:
        if isinstance(op, PendingRequest):
            return await already_decided_async(ledger, op)
        return await resolve_async(target, op.pending, approved=op.approved, attempt_key=op.key)

    return perform


def _check_steps(records: Mapping[str, object]) -> _Steps[dict[str, dict[str, object]]]:
    """Each record as given, with ``"decided"`` (the verdict) when it was spent already."""
    out: dict[str, dict[str, object]] = {}
    for call_id, record in records.items():
        pending = PendingRequest.from_dict(record)  # a dict, or UnreadableRecord
        found: Resolution | None = yield pending
        out[call_id] = {**cast(Mapping[str, object], record)}
        if found is not None:
            out[call_id][DECIDED_KEY] = found.verdict.value
    return out


def sync_only(ledger: object, async_form: str) -> None:
    """Refuse an async ledger in a sync call that does I/O, naming the form to await."""
    if is_async_ledger(ledger):
        raise TypeError(f"{type(ledger).__name__} is async: use {async_form} (awaited)")


def check_all(ledger: object, records: Mapping[str, object]) -> dict[str, dict[str, object]]:
    """Before asking the person: the records, each marked ``"decided"`` when its request
    was already spent (a reused conversation and tool call id, or a close), so the host
    asks only the others; a batch answers a marked call with a refusal that says so,
    without spending or needing an answer. One ``is_spent`` per call."""
    sync_only(ledger, "acheck_all")
    return run_steps(_check_steps(records), _performer(ledger, ledger))


async def acheck_all(ledger: object, records: Mapping[str, object]) -> dict[str, dict[str, object]]:
    """:func:`check_all` for an async ledger (or a sync one)."""
    return await run_steps_async(_check_steps(records), _async_performer(ledger, ledger))


def _read(
    records: Mapping[str, object], answers: Mapping[str, bool]
) -> tuple[dict[str, PendingRequest], dict[str, Decision]]:
    """Every check a batch can make before anything is spent (the answers' types, the
    call ids, every record), and the calls decided before their question."""
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
    pending = {call_id: PendingRequest.from_dict(record) for call_id, record in records.items()}
    marked = {call_id: decided_in(record) for call_id, record in records.items()}
    before = {call_id: d for call_id, d in marked.items() if d is not None}
    waiting = [call_id for call_id in records if call_id not in before]
    if not answers and (waiting or not records):
        raise InvalidAnswer("no answers given: {call id: True or False}; nothing was spent")
    return {c: pending[c] for c in answers if c not in before}, before


def decided_in(record: object) -> Decision | None:
    """The refusal a record marked by :func:`check_all` carries (no question, no answer,
    no spend), or ``None``; a mark this version does not know reads as already spent."""
    if not isinstance(record, Mapping) or record.get(DECIDED_KEY) is None:
        return None
    closed = record.get(DECIDED_KEY) == ResolveVerdict.CLOSED_BY_HOST.value
    verdict = ResolveVerdict.CLOSED_BY_HOST if closed else ResolveVerdict.ALREADY_SPENT
    return decided_before(Resolution(verdict))


def _not_recorded(
    failed: str, resolution: Resolution, secret: bytes | str | None, recorded: list[str]
) -> ApprovalNotRecorded:
    landed = resolution.verdict is ResolveVerdict.FAILED_COUNTS_AS_SPENT
    what = "it may have landed" if landed else "it did not land"
    taken = f"; recorded before it: {recorded}" if recorded else ""
    retry = (
        "answer again with attempt_secret=error.attempt_secret, which takes back this"
        " attempt's own records and nobody else's"
        if secret is not None
        else "answer again"
    )
    error = ApprovalNotRecorded(
        f"the decision ledger failed recording the answer to call {failed!r} ({what}{taken});"
        f" nothing ran: {retry}",
        attempt_secret=secret,
        recorded=recorded,
    )
    error.__cause__ = resolution.error
    return error


def _spend_steps(
    pending: dict[str, PendingRequest],
    answers: Mapping[str, bool],
    secret: bytes | str | None,
    current: str | None,
) -> _Steps[dict[str, Decision]]:
    """Spend one run's answers in request-id order, stopping at the first that is not
    this attempt's: racing resumes meet on the same first call, so a loser spends nothing
    more; a failure part way raises a retry that takes this attempt's records back
    (``secret`` is set exactly when the ledger re-enters)."""
    decisions: dict[str, Decision] = {}
    recorded: list[str] = []
    for call_id in sorted(pending, key=lambda c: pending[c].request_id):
        one = pending[call_id]
        resolution: Resolution = yield _Spend(one, answers[call_id], _key(one, secret))
        verdict = resolution.verdict
        retryable = verdict is ResolveVerdict.FAILED_COUNTS_AS_SPENT and secret is not None
        if verdict is ResolveVerdict.FAILED_NOT_LANDED or retryable:
            raise _not_recorded(call_id, resolution, secret, recorded)
        reason = changed_reason(one.store_id, current)
        decisions[call_id] = checked(_decision(resolution, reason))
        if decisions[call_id].decided_here:
            recorded.append(call_id)
    return decisions


def _batch_steps(
    ledger: object,
    records: Mapping[str, object],
    answers: Mapping[str, bool],
    secret: bytes | str | None,
    reenters: bool,
) -> _Steps[Batch]:
    pending, before = _read(records, answers)
    current = store_id_of(ledger)
    moved = {call_id: p for call_id, p in pending.items() if p.store_id != current}
    if moved:  # H5: nothing is spent; the new records are checked before the question
        minted = {call_id: mint(ledger, p.request_id).to_dict() for call_id, p in moved.items()}
        again = yield from _check_steps(minted)
        asked = next(iter(moved.values())).store_id
        return Batch(ask_again=again, reason=changed_reason(asked, current))
    if not reenters and len(pending) > 1:
        raise BatchNeedsReentry(
            f"{len(pending)} answers in one batch, and this ledger offers neither spend_as"
            " nor markers (spend_marker/is_marker_spent): a batch that failed part way could"
            " not be taken back by a retry, so nothing was spent. Answer one call per batch,"
            " or use a ledger with re-entry (every ledger shipped here has spend_as)"
        )
    if not reenters:
        secret = None
    elif secret is None and pending:
        secret = new_attempt_secret()  # this attempt's own: a racing resume makes another
    decisions = yield from _spend_steps(pending, answers, secret, current)
    ordered = {call_id: decisions[call_id] for call_id in answers if call_id in decisions}
    return Batch(decisions={**ordered, **before})


def decide_all(
    ledger: object,
    records: Mapping[str, object],
    answers: Mapping[str, bool],
    *,
    attempt_secret: bytes | str | None = None,
) -> Batch:
    """Spend every answer of one paused run (``records``: tool call id -> pending dict).

    All or retryable: every check is made before the first spend; a ledger failure part
    way raises :class:`ApprovalNotRecorded`, whose ``attempt_secret`` (this one, or one
    made for this attempt when none is given) lets the retry take its own records back.
    Asks again, spending nothing, when any call was minted under another store; raises
    :class:`NotThisResume` when another resume holds any of them, and
    :class:`InvalidAnswer` for an empty mapping while a call still waits for an answer.
    Calls marked by :func:`check_all` are refused without an answer or a spend.
    """
    target = reentrant(ledger)
    steps = _batch_steps(ledger, records, answers, attempt_secret, can_reenter(target))
    return run_steps(steps, _performer(ledger, target))


async def adecide_all(
    ledger: object,
    records: Mapping[str, object],
    answers: Mapping[str, bool],
    *,
    attempt_secret: bytes | str | None = None,
) -> Batch:
    """:func:`decide_all` for an async ledger (or a sync one)."""
    target = reentrant(ledger)
    steps = _batch_steps(ledger, records, answers, attempt_secret, can_reenter(target))
    return await run_steps_async(steps, _async_performer(ledger, target))


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
