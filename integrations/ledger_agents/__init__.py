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
from dataclasses import dataclass
from urllib.parse import quote

from ledger_core import (
    AsyncMarkerReentry,
    LedgerUnavailable,
    MarkerReentry,
    PendingRequest,
    Resolution,
    ResolveVerdict,
    attempt_key,
    can_reenter,
    is_async_ledger,
    resolve,
    resolve_async,
)
from ledger_core.ids import MAX_ID_BYTES

__all__ = [
    "Action",
    "ApprovalNotRecorded",
    "Decision",
    "adecide",
    "decide",
    "derive_request_id",
    "reentrant",
]


def derive_request_id(framework: str, *parts: str) -> str:
    """The request id of one paused tool call, stable across processes and versions.

    ``framework/part/part/...`` with each part percent-encoded (so ``/`` inside a part
    cannot shift the boundaries: distinct parts, distinct ids), e.g.
    ``langgraph/<thread id>/<tool call id>``. An id over 1024 UTF-8 bytes becomes
    ``framework/sha256/<hex of the full id>``.
    """
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
    ResolveVerdict.ALREADY_SPENT: "Not run: this approval was already used by another resume.",
    ResolveVerdict.CLOSED_BY_HOST: "Not run: the host closed this approval after it timed out.",
    ResolveVerdict.REFUSED_INVALID: "Not run: the decision ledger gave an invalid answer.",
    ResolveVerdict.FAILED_COUNTS_AS_SPENT: (
        "Not run: the decision ledger failed and this approval may have been used."
    ),
    ResolveVerdict.LEDGER_CHANGED: "The decision ledger changed since the question: asking again.",
}
DENIED = "The person denied this call."


@dataclass(frozen=True)
class Decision:
    action: Action
    message: str
    resolution: Resolution

    @property
    def run(self) -> bool:
        return self.action is Action.RUN


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


def _decision(resolution: Resolution, approved: bool) -> Decision:
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
        return Decision(Action.ASK_AGAIN, _MESSAGES[verdict], resolution)
    return Decision(Action.REFUSE, _MESSAGES[verdict], resolution)


def decide(
    ledger: object,
    pending: PendingRequest,
    approved: bool,
    *,
    attempt_secret: bytes | str | None = None,
) -> Decision:
    """Spend a person's answer (approval or denial) and map the verdict to an action.

    With ``attempt_secret`` (held by this resume attempt only) the same attempt, retried
    after a tool error or a crash, gets ``RUN`` again; any other attempt is refused.
    Raises :class:`ApprovalNotRecorded` when the spend failed without landing.
    """
    key = _key(pending, attempt_secret)
    target = reentrant(ledger) if key is not None else ledger
    return _decision(resolve(target, pending, attempt_key=key), approved is True)


async def adecide(
    ledger: object,
    pending: PendingRequest,
    approved: bool,
    *,
    attempt_secret: bytes | str | None = None,
) -> Decision:
    """:func:`decide` for an async ledger (or a sync one)."""
    key = _key(pending, attempt_secret)
    target = reentrant(ledger) if key is not None else ledger
    resolution = await resolve_async(target, pending, attempt_key=key)
    return _decision(resolution, approved is True)
