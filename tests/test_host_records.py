"""The persisted forms of a pending request and of the verdicts: plain JSON, versioned."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ledger_core import (
    CloseVerdict,
    Closure,
    LedgerUnavailable,
    PendingRequest,
    RecordedError,
    Resolution,
    ResolveVerdict,
    UnreadableRecord,
)

RECORDS: list[Any] = [
    PendingRequest("req-1", "sqlite:uuid:default"),
    PendingRequest("ünï\x00:code", None),
    Resolution(ResolveVerdict.RUN),
    Resolution(ResolveVerdict.FAILED_NOT_LANDED, LedgerUnavailable("store down")),
    Closure(CloseVerdict.CLOSED_PROVEN, "the host's spend won", recorded=True),
    Closure(CloseVerdict.POSSIBLY_RUN, "the closing spend failed", TimeoutError("slow")),
]


@pytest.mark.parametrize("record", RECORDS, ids=repr)
def test_round_trip_through_json(record: Any) -> None:
    data = json.loads(json.dumps(record.to_dict()))
    back = type(record).from_dict(data)
    assert back.to_dict() == record.to_dict()
    if record.__dict__.get("error") is None:
        assert back == record


def test_errors_keep_only_type_and_message() -> None:
    data = Resolution(ResolveVerdict.FAILED_NOT_LANDED, LedgerUnavailable("down")).to_dict()
    assert data["error"] == {"type": "LedgerUnavailable", "message": "down"}
    back = Resolution.from_dict(data)
    assert isinstance(back.error, RecordedError)
    assert (back.error.type_name, str(back.error)) == ("LedgerUnavailable", "down")


def test_the_pinned_v1_form_still_reads() -> None:
    """Written by version 1 today; a later release must keep reading exactly this."""
    pending = {"kind": "pending-request", "version": 1, "request_id": "r", "store_id": "s"}
    assert PendingRequest.from_dict(pending) == PendingRequest("r", "s")
    res = {"kind": "resolution", "version": 1, "verdict": "ledger-changed", "error": None}
    assert Resolution.from_dict(res) == Resolution(ResolveVerdict.LEDGER_CHANGED)


def test_unknown_future_fields_are_tolerated() -> None:
    data = PendingRequest("r", None).to_dict() | {"minted_at": 1.5, "extra": {"x": [1]}}
    assert PendingRequest.from_dict(data) == PendingRequest("r", None)


@pytest.mark.parametrize("version", [2, 0, "1", True, None])
def test_a_wrong_version_is_refused_clearly(version: object) -> None:
    data = PendingRequest("r", None).to_dict() | {"version": version}
    with pytest.raises(UnreadableRecord, match="version"):
        PendingRequest.from_dict(data)


@pytest.mark.parametrize(
    "data",
    [
        None,
        [],
        {"kind": "resolution", "version": 1, "request_id": "r", "store_id": None},
        {"kind": "pending-request", "version": 1, "store_id": None},
        {"kind": "pending-request", "version": 1, "request_id": "r", "store_id": 7},
        {"kind": "pending-request", "version": 1, "request_id": "", "store_id": None},
    ],
)
def test_malformed_pending_is_refused(data: object) -> None:
    with pytest.raises(ValueError):  # UnreadableRecord, or InvalidRequestId for a bad id
        PendingRequest.from_dict(data)


def test_an_unknown_verdict_is_refused_not_guessed() -> None:
    data = Resolution(ResolveVerdict.RUN).to_dict() | {"verdict": "run-twice"}
    with pytest.raises(UnreadableRecord, match="unknown verdict"):
        Resolution.from_dict(data)
    closure = Closure(CloseVerdict.CLOSED_PROVEN, "x").to_dict() | {"recorded": "yes"}
    with pytest.raises(UnreadableRecord, match="recorded"):
        Closure.from_dict(closure)
