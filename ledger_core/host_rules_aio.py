# async-to-sync: host_rules.py
# async-to-sync rename: resolve_async=resolve already_decided_async=already_decided
# async-to-sync rename: close_pause_async=close_pause spend_landed_async=spend_landed
"""The host rules H1-H5 on a ledger, each read top-down from its public function to the
ledger calls it makes (``_ask``: a raise is an outcome, never a crash).

Written once, in ``host_rules_aio.py`` (the ``*_async`` rules); ``host_rules.py`` (the
sync rules) is generated from it, so the two cannot decide differently (C9). The async
rules take a sync ledger too (an answer is awaited only when awaitable); the sync rules
refuse an async ledger. The verdicts and records are :mod:`ledger_core.host`'s.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Literal

from .errors import LedgerError
from .host import (
    CloseVerdict,
    Closure,
    LandedVerdict,
    PendingRequest,
    Resolution,
    ResolveVerdict,
    require_answer,
)
from .ids import closed_proven_marker, validate_attempt_key, validate_request_id
from .protocol import store_id_of

ASYNC = True

Method = Literal["spend", "is_spent", "spend_marker", "is_marker_spent", "spend_as"]


@dataclass(frozen=True)
class _Outcome:
    """What one ledger call did: answered ``value``, raised ``error``, or the ledger has
    no such method (``missing``)."""

    value: object = None
    error: BaseException | None = None
    missing: bool = False


class _AsyncLedgerInSyncRule(TypeError):
    pass


def _refuse_awaitable(ledger: object, method: str, value: object) -> None:
    """A sync rule never awaits: an awaitable answer means an async ledger, refused (a
    coroutine is closed unrun), never guessed."""
    if inspect.isawaitable(value):
        if inspect.iscoroutine(value):
            value.close()
        raise _AsyncLedgerInSyncRule(
            f"{type(ledger).__name__}.{method} is async: use the *_async form of this rule"
        )


async def _ask(ledger: object, method: Method, *args: object) -> _Outcome:
    """One call of the ledger's ``method``; a raise is an outcome (fail closed)."""
    call = getattr(ledger, method, None)
    if call is None:
        return _Outcome(missing=True)
    try:
        value = call(*args)
        if ASYNC:  # the async rules take a sync ledger's answer as it is
            value = await value if inspect.isawaitable(value) else value
    except Exception as exc:
        return _Outcome(error=exc)
    if not ASYNC:
        _refuse_awaitable(ledger, method, value)
    return _Outcome(value)


async def spend_landed_async(ledger: object, request_id: str) -> LandedVerdict:
    """H2: after ``spend(request_id)`` raised, ask whether it landed: only an
    ``is_spent`` that answered exactly ``False`` leaves the pause answerable."""
    out = await _ask(ledger, "is_spent", request_id)
    if out.error is None and not out.missing and out.value is False:
        return LandedVerdict.NOT_LANDED
    return LandedVerdict.COUNTS_AS_SPENT


async def resolve_async(
    ledger: object, pending: PendingRequest, *, approved: bool, attempt_key: str | None = None
) -> Resolution:
    """A person answered ``pending``: spend it and say what the host may do (H1, H2, H4, H5).

    ``approved`` is the person's answer, required so a denial can never read as a run: a
    denial is spent too (``DENIED``: no later approval can run the call); only an
    approval this call spent is ``RUN``. A non-bool raises :class:`InvalidAnswer` before
    any I/O. With ``attempt_key`` and a ledger with ``spend_as`` (C10), the same attempt
    resolving again (a retry, a restart) gets its verdict again, every other one
    ``ALREADY_SPENT``; a ledger without ``spend_as`` is asked a plain ``spend``.
    """
    current = store_id_of(ledger)
    answer = require_answer(approved)  # before any I/O: a non-bool is never spent
    validate_request_id(pending.request_id)  # a bad id is the caller's bug, not a verdict
    if attempt_key is not None:
        validate_attempt_key(attempt_key)
    if pending.store_id != current:
        return Resolution(ResolveVerdict.LEDGER_CHANGED)
    out = _Outcome(missing=True)
    if attempt_key is not None:  # C10: the winner of an earlier attempt re-enters
        out = await _ask(ledger, "spend_as", pending.request_id, attempt_key)
    if out.missing and out.error is None:  # no re-entry: exactly the plain rule
        out = await _ask(ledger, "spend", pending.request_id)
    if out.error is not None or out.missing:
        landed = await spend_landed_async(ledger, pending.request_id)
        verdict = (
            ResolveVerdict.FAILED_NOT_LANDED
            if landed is LandedVerdict.NOT_LANDED
            else ResolveVerdict.FAILED_COUNTS_AS_SPENT
        )
        return Resolution(verdict, out.error)
    if out.value is True:
        return Resolution(ResolveVerdict.RUN if answer else ResolveVerdict.DENIED)
    if out.value is not False:
        return Resolution(ResolveVerdict.REFUSED_INVALID)
    return await _spent_verdict(ledger, pending.request_id)


async def _spent_verdict(ledger: object, request_id: str) -> Resolution:
    """Who spent an id this call could not: the host's close (H4), or another answer."""
    closed = await _ask(ledger, "is_marker_spent", closed_proven_marker(request_id))
    if closed.error is None and closed.value is True:
        return Resolution(ResolveVerdict.CLOSED_BY_HOST)
    return Resolution(ResolveVerdict.ALREADY_SPENT)


async def already_decided_async(ledger: object, pending: PendingRequest) -> Resolution | None:
    """Before asking the person: ``None`` when an answer can still count, else the
    verdict any answer would get (``ALREADY_SPENT``, ``CLOSED_BY_HOST``), so the host
    says so instead of asking a question that cannot count (a reused thread and tool call
    id, or a close). One ``is_spent`` (and a marker read when spent); a raise, or an
    answer that is not a bool, is raised: no question is asked on a guess."""
    validate_request_id(pending.request_id)
    out = await _ask(ledger, "is_spent", pending.request_id)
    if out.error is not None:
        raise out.error
    if out.missing or type(out.value) is not bool:
        raise LedgerError(f"is_spent answered {out.value!r}, not a bool: cannot ask on that")
    if out.value is False:
        return None
    return await _spent_verdict(ledger, pending.request_id)


async def close_pause_async(ledger: object, pending: PendingRequest) -> Closure:
    """Close a pause that no answer can reach, with a proof where one is possible (H3, H4)."""
    current = store_id_of(ledger)
    validate_request_id(pending.request_id)
    if current is None:
        return Closure(CloseVerdict.POSSIBLY_RUN, "the ledger has no store_id: it never proves")
    if pending.store_id != current:  # writes nothing: the pause stays open there
        return Closure(
            CloseVerdict.POSSIBLY_RUN,
            f"ledger-changed: asked under store {pending.store_id!r}, this ledger is store"
            f" {current!r}; nothing was written, so the pause is still open and an"
            " answer there can still run the tool: close it on the ledger it was asked under",
        )
    # The marker lives where no request id can reach it (``spend_marker``). A ledger
    # without that space records no close: a prefix in the id space could be forged by
    # a request whose id is the marker, and would then "prove" a close that never won.
    marker = closed_proven_marker(pending.request_id)
    prior = await _ask(ledger, "is_marker_spent", marker)
    if prior.error is None and prior.value is True:
        return Closure(CloseVerdict.CLOSED_PROVEN, "an earlier close proved it", recorded=True)
    out = await _ask(ledger, "spend", pending.request_id)
    if out.error is not None or out.missing:
        return Closure(CloseVerdict.POSSIBLY_RUN, "the closing spend failed", out.error)
    if out.value is not True:
        return Closure(CloseVerdict.POSSIBLY_RUN, "a decision reached the request first")
    mark = await _ask(ledger, "spend_marker", marker)
    if mark.missing:
        return Closure(
            CloseVerdict.CLOSED_PROVEN,
            "proven, but not recorded: the ledger has no spend_marker (no marker space)",
        )
    if mark.error is not None or not isinstance(mark.value, bool):  # False: a racing close won
        return Closure(
            CloseVerdict.CLOSED_PROVEN, "proven, but the close was not recorded", mark.error
        )
    return Closure(CloseVerdict.CLOSED_PROVEN, "the host's spend won", recorded=True)
