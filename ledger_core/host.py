"""The host rules H1-H5, written once for sync and async ledgers.

Each rule is a generator that yields the ledger calls it needs and returns a verdict,
run against a sync ledger (:func:`_perform`) or an async one (:func:`_perform_async`,
which takes a sync one too), so the two shapes cannot drift apart.
"""

from __future__ import annotations

import enum
import inspect
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from .errors import InvalidAnswer, LedgerError
from .ids import closed_proven_marker, validate_attempt_key, validate_request_id
from .protocol import store_id_of
from .steps import run_steps, run_steps_async

_E = TypeVar("_E", bound=enum.Enum)
_R = TypeVar("_R")

Method = Literal["spend", "is_spent", "spend_marker", "is_marker_spent", "spend_as"]

# The persisted form (``to_dict``): plain JSON-safe data. New fields may be added under
# the same version (readers ignore fields they do not know); a change an older reader
# would misread bumps it, and such a record is refused, never guessed.
RECORD_VERSION = 1
_MAX_MESSAGE = 2000


class UnreadableRecord(LedgerError, ValueError):
    """A persisted pending request or verdict that this version cannot read safely."""


class RecordedError(Exception):
    """An error read back from a persisted verdict: its type name and message, no more."""

    def __init__(self, type_name: str, message: str) -> None:
        super().__init__(message)
        self.type_name = type_name
        self.message = message


def _error_to_dict(error: BaseException | None) -> dict[str, str] | None:
    if error is None:
        return None
    if isinstance(error, RecordedError):
        return {"type": error.type_name, "message": error.message}
    return {"type": type(error).__name__, "message": str(error)[:_MAX_MESSAGE]}


def _envelope(kind: str, **fields: object) -> dict[str, Any]:
    return {"kind": kind, "version": RECORD_VERSION, **fields}


def _record(data: object, kind: str) -> dict[str, Any]:
    """Check a record's kind and version; unknown extra fields are tolerated."""
    if not isinstance(data, dict):
        raise UnreadableRecord(f"a {kind} record is a dict, not {type(data).__name__}")
    if data.get("kind") != kind:
        raise UnreadableRecord(f"not a {kind} record (kind={data.get('kind')!r})")
    version = data.get("version")
    if type(version) is not int:
        raise UnreadableRecord(f"{kind} record has no integer version")
    if version != RECORD_VERSION:
        raise UnreadableRecord(
            f"{kind} record has version {version}; this decision-ledger reads version "
            f"{RECORD_VERSION} (a newer writer: upgrade this host)"
        )
    return data


def _field(data: dict[str, Any], name: str, types: type | tuple[type, ...]) -> Any:
    value = data.get(name)
    if not isinstance(value, types) or isinstance(value, bool) is not (types is bool):
        raise UnreadableRecord(f"{data['kind']} record: field {name!r} is missing or mistyped")
    return value


def _enum(data: dict[str, Any], enum_type: type[_E]) -> _E:
    value = _field(data, "verdict", str)
    try:
        return enum_type(value)
    except ValueError:
        raise UnreadableRecord(f"{data['kind']} record: unknown verdict {value!r}") from None


def _error_from_dict(data: dict[str, Any]) -> RecordedError | None:
    error = data.get("error")
    if error is None:
        return None
    if not (
        isinstance(error, dict)
        and isinstance(error.get("type"), str)
        and isinstance(error.get("message"), str)
    ):
        raise UnreadableRecord(f"{data['kind']} record: field 'error' is mistyped")
    return RecordedError(error["type"], error["message"])


class RunVerdict(enum.Enum):
    """H1: what the result of one ``spend`` allows."""

    RUN = "run"
    REFUSED = "refused"


class LandedVerdict(enum.Enum):
    """H2: after a ``spend`` raised, did it land?"""

    NOT_LANDED = "not-landed"  # is_spent answered exactly False: the pause stays answerable
    COUNTS_AS_SPENT = "counts-as-spent"  # anything else: stop offering the pause


class ResolveVerdict(enum.Enum):
    """What a host does with a person's answer to a paused request."""

    RUN = "run"  # this approval spent the request here: run the tool, once
    DENIED = "denied"  # this denial spent the request here: it never runs, no later answer can
    ALREADY_SPENT = "already-spent"  # another answer spent it first
    CLOSED_BY_HOST = "closed-by-host"  # H4: the host closed the pause with a proof
    REFUSED_INVALID = "refused-invalid"  # the ledger answered something other than a bool
    FAILED_NOT_LANDED = "failed-not-landed"  # spend raised and did not land: may be answered again
    FAILED_COUNTS_AS_SPENT = "failed-counts-as-spent"  # spend raised and may have landed
    LEDGER_CHANGED = "ledger-changed"  # H5: minted under another store: ask again


class CloseVerdict(enum.Enum):
    """H3: how a host closes a pause that no answer can reach any more."""

    CLOSED_PROVEN = "closed-proven"  # the host's own spend won: the call never ran, and never will
    POSSIBLY_RUN = "possibly-run"  # no proof: record the call as possibly run


@dataclass(frozen=True)
class PendingRequest:
    """A paused request and the ``store_id`` of the ledger it was asked under (H5)."""

    request_id: str
    store_id: str | None

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-safe data to persist with the paused run (checkpoint, run state)."""
        return _envelope("pending-request", request_id=self.request_id, store_id=self.store_id)

    @classmethod
    def from_dict(cls, data: object) -> PendingRequest:
        record = _record(data, "pending-request")
        request_id = _field(record, "request_id", str)
        validate_request_id(request_id)
        store_id = record.get("store_id")
        if store_id is not None and not isinstance(store_id, str):
            raise UnreadableRecord("pending-request record: field 'store_id' is mistyped")
        return cls(request_id, store_id)


@dataclass(frozen=True)
class Resolution:
    verdict: ResolveVerdict
    error: BaseException | None = None

    @property
    def may_run(self) -> bool:
        """True only for :attr:`ResolveVerdict.RUN`: approved, and spent by this call (H1)."""
        return self.verdict is ResolveVerdict.RUN

    @property
    def decided_here(self) -> bool:
        """This call's answer is the one recorded (``RUN`` or ``DENIED``): no other
        resume's answer counts; every other verdict says this answer did not decide."""
        return self.verdict in (ResolveVerdict.RUN, ResolveVerdict.DENIED)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe; an error keeps only its type name and message."""
        return _envelope("resolution", verdict=self.verdict.value, error=_error_to_dict(self.error))

    @classmethod
    def from_dict(cls, data: object) -> Resolution:
        record = _record(data, "resolution")
        return cls(_enum(record, ResolveVerdict), _error_from_dict(record))


@dataclass(frozen=True)
class Closure:
    verdict: CloseVerdict
    reason: str
    error: BaseException | None = None
    recorded: bool = False  # whether ``closed-proven:<id>`` is in the ledger (H4)

    @property
    def proven(self) -> bool:
        return self.verdict is CloseVerdict.CLOSED_PROVEN

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe; an error keeps only its type name and message."""
        return _envelope(
            "closure",
            verdict=self.verdict.value,
            reason=self.reason,
            error=_error_to_dict(self.error),
            recorded=self.recorded,
        )

    @classmethod
    def from_dict(cls, data: object) -> Closure:
        record = _record(data, "closure")
        return cls(
            _enum(record, CloseVerdict),
            _field(record, "reason", str),
            _error_from_dict(record),
            _field(record, "recorded", bool),
        )


@dataclass(frozen=True)
class _Call:
    method: Method
    arg: str | bytes | tuple[str, str]  # an id; marker bytes; (id, attempt key) for spend_as

    @property
    def args(self) -> tuple[object, ...]:
        return self.arg if isinstance(self.arg, tuple) else (self.arg,)


@dataclass(frozen=True)
class _Outcome:
    value: object = None
    error: BaseException | None = None
    missing: bool = False  # the ledger has no such method


_Steps = Generator[_Call, _Outcome, _R]


def authorize(result: object) -> RunVerdict:
    """H1: only a result that ``is True`` lets the call run (not ``1``, not truthy)."""
    return RunVerdict.RUN if result is True else RunVerdict.REFUSED


def mint(ledger: object, request_id: str) -> PendingRequest:
    """Remember the ledger a request is asked under, for H5 when it is answered."""
    return PendingRequest(request_id, store_id_of(ledger))


def _landed_steps(request_id: str) -> _Steps[LandedVerdict]:
    out = yield _Call("is_spent", request_id)
    if out.error is None and not out.missing and out.value is False:
        return LandedVerdict.NOT_LANDED
    return LandedVerdict.COUNTS_AS_SPENT


def require_answer(approved: object, accepted: str = "True (approve) or False (deny)") -> bool:
    """``approved`` when it is exactly ``True`` or ``False``; else :class:`InvalidAnswer`
    (nothing is spent: a ``"no"`` must not be spent as an approval, nor ``1`` as one)."""
    if type(approved) is bool:
        return approved
    shown = repr(approved)
    shown = shown if len(shown) <= 80 else shown[:77] + "..."
    raise InvalidAnswer(
        f"an answer must be {accepted}, not {type(approved).__name__} {shown}; nothing was spent"
    )


def _spent_verdict(request_id: str) -> _Steps[Resolution]:
    """Who spent an id this call could not: the host's close (H4), or another answer."""
    closed = yield _Call("is_marker_spent", closed_proven_marker(request_id))
    if closed.error is None and closed.value is True:
        return Resolution(ResolveVerdict.CLOSED_BY_HOST)
    return Resolution(ResolveVerdict.ALREADY_SPENT)


def _resolve_steps(
    pending: PendingRequest,
    current_store_id: str | None,
    attempt_key: str | None,
    approved: object,
) -> _Steps[Resolution]:
    answer = require_answer(approved)  # before any I/O: a non-bool is never spent
    validate_request_id(pending.request_id)  # a bad id is the caller's bug, not a verdict
    if attempt_key is not None:
        validate_attempt_key(attempt_key)
    if pending.store_id != current_store_id:
        return Resolution(ResolveVerdict.LEDGER_CHANGED)
    out = _Outcome(missing=True)
    if attempt_key is not None:  # C10: the winner of an earlier attempt re-enters
        out = yield _Call("spend_as", (pending.request_id, attempt_key))
    if out.missing and out.error is None:  # no re-entry: exactly the plain rule
        out = yield _Call("spend", pending.request_id)
    if out.error is not None or out.missing:
        landed = yield from _landed_steps(pending.request_id)
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
    return (yield from _spent_verdict(pending.request_id))


def _asked_steps(pending: PendingRequest) -> _Steps[Resolution | None]:
    """Before a question: ``None`` while an answer can still count, else why it cannot
    (the request was already spent: a reused thread and tool call id, or a close). A
    raise or a non-bool from ``is_spent`` is raised: no question is asked on a guess."""
    validate_request_id(pending.request_id)
    out = yield _Call("is_spent", pending.request_id)
    if out.error is not None:
        raise out.error
    if out.missing or type(out.value) is not bool:
        raise LedgerError(f"is_spent answered {out.value!r}, not a bool: cannot ask on that")
    if out.value is False:
        return None
    return (yield from _spent_verdict(pending.request_id))


def _close_steps(pending: PendingRequest, current_store_id: str | None) -> _Steps[Closure]:
    validate_request_id(pending.request_id)
    if current_store_id is None:
        return Closure(CloseVerdict.POSSIBLY_RUN, "the ledger has no store_id: it never proves")
    if pending.store_id != current_store_id:  # writes nothing: the pause stays open there
        return Closure(
            CloseVerdict.POSSIBLY_RUN,
            f"ledger-changed: asked under store {pending.store_id!r}, this ledger is store"
            f" {current_store_id!r}; nothing was written, so the pause is still open and an"
            " answer there can still run the tool: close it on the ledger it was asked under",
        )
    # The marker lives where no request id can reach it (``spend_marker``). A ledger
    # without that space records no close: a prefix in the id space could be forged by
    # a request whose id is the marker, and would then "prove" a close that never won.
    marker = closed_proven_marker(pending.request_id)
    prior = yield _Call("is_marker_spent", marker)
    if prior.error is None and prior.value is True:
        return Closure(CloseVerdict.CLOSED_PROVEN, "an earlier close proved it", recorded=True)
    out = yield _Call("spend", pending.request_id)
    if out.error is not None or out.missing:
        return Closure(CloseVerdict.POSSIBLY_RUN, "the closing spend failed", out.error)
    if out.value is not True:
        return Closure(CloseVerdict.POSSIBLY_RUN, "a decision reached the request first")
    mark = yield _Call("spend_marker", marker)
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


class _AsyncLedgerInSyncRule(TypeError):
    pass


def _perform(ledger: object) -> Callable[[_Call], _Outcome]:
    """One rule step against a sync ledger."""

    def perform(call: _Call) -> _Outcome:
        method = getattr(ledger, call.method, None)
        if method is None:
            return _Outcome(missing=True)
        try:
            value = method(*call.args)
        except Exception as exc:  # fail closed: a raise is an outcome, not a crash
            return _Outcome(error=exc)
        if inspect.isawaitable(value):
            if inspect.iscoroutine(value):
                value.close()
            raise _AsyncLedgerInSyncRule(
                f"{type(ledger).__name__}.{call.method} is async: use the *_async form of this rule"
            )
        return _Outcome(value=value)

    return perform


def _perform_async(ledger: object) -> Callable[[_Call], Awaitable[_Outcome]]:
    """One rule step against an async ledger, or a sync one (awaited when awaitable)."""

    async def perform(call: _Call) -> _Outcome:
        method = getattr(ledger, call.method, None)
        if method is None:
            return _Outcome(missing=True)
        try:
            value = method(*call.args)
            return _Outcome(value=await value if inspect.isawaitable(value) else value)
        except Exception as exc:
            return _Outcome(error=exc)

    return perform


def spend_landed(ledger: object, request_id: str) -> LandedVerdict:
    """H2: after ``spend(request_id)`` raised, ask whether it landed."""
    return run_steps(_landed_steps(request_id), _perform(ledger))


async def spend_landed_async(ledger: object, request_id: str) -> LandedVerdict:
    return await run_steps_async(_landed_steps(request_id), _perform_async(ledger))


def resolve(
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
    steps = _resolve_steps(pending, store_id_of(ledger), attempt_key, approved)
    return run_steps(steps, _perform(ledger))


async def resolve_async(
    ledger: object, pending: PendingRequest, *, approved: bool, attempt_key: str | None = None
) -> Resolution:
    steps = _resolve_steps(pending, store_id_of(ledger), attempt_key, approved)
    return await run_steps_async(steps, _perform_async(ledger))


def already_decided(ledger: object, pending: PendingRequest) -> Resolution | None:
    """Before asking the person: ``None`` when an answer can still count, else the
    verdict any answer would get (``ALREADY_SPENT``, ``CLOSED_BY_HOST``), so the host
    says so instead of asking a question that cannot count. One ``is_spent`` (and a
    marker read when spent); a raise is raised."""
    return run_steps(_asked_steps(pending), _perform(ledger))


async def already_decided_async(ledger: object, pending: PendingRequest) -> Resolution | None:
    return await run_steps_async(_asked_steps(pending), _perform_async(ledger))


def close_pause(ledger: object, pending: PendingRequest) -> Closure:
    """Close a pause that no answer can reach, with a proof where one is possible (H3, H4)."""
    return run_steps(_close_steps(pending, store_id_of(ledger)), _perform(ledger))


async def close_pause_async(ledger: object, pending: PendingRequest) -> Closure:
    return await run_steps_async(_close_steps(pending, store_id_of(ledger)), _perform_async(ledger))
