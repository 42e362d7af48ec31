"""What a host works with under the rules H1-H5: the verdicts, the paused request it
persists (:class:`PendingRequest`) and the persisted verdicts, with the checks that need
no I/O (:func:`authorize`, :func:`mint`, :func:`require_answer`). The rules that call a
ledger are :mod:`ledger_core.host_rules` (sync) and :mod:`ledger_core.host_rules_aio`
(async).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, TypeVar

from .errors import InvalidAnswer, LedgerError
from .ids import validate_request_id
from .protocol import store_id_of

_E = TypeVar("_E", bound=enum.Enum)

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


def authorize(result: object) -> RunVerdict:
    """H1: only a result that ``is True`` lets the call run (not ``1``, not truthy)."""
    return RunVerdict.RUN if result is True else RunVerdict.REFUSED


def mint(ledger: object, request_id: str) -> PendingRequest:
    """Remember the ledger a request is asked under, for H5 when it is answered."""
    return PendingRequest(request_id, store_id_of(ledger))


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
