"""Every verdict of the host rules H1-H5, against sync and async ledgers alike."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ledger_core import (
    CloseVerdict,
    Closure,
    InvalidAnswer,
    InvalidRequestId,
    LandedVerdict,
    LedgerError,
    LedgerUnavailable,
    PendingRequest,
    Resolution,
    ResolveVerdict,
    RunVerdict,
    already_decided,
    already_decided_async,
    authorize,
    close_pause,
    close_pause_async,
    closed_proven_marker,
    mint,
    resolve,
    resolve_async,
    spend_landed,
    spend_landed_async,
)
from ledger_core.ids import MAX_ID_BYTES
from tests.scripted import AsyncScripted, Scripted, constant, raises

FLAVORS = ["sync", "async"]


def make(flavor: str, **kwargs: Any) -> Scripted:
    return Scripted(**kwargs) if flavor == "sync" else AsyncScripted(**kwargs)


def do_resolve(
    flavor: str, ledger: object, pending: PendingRequest, approved: Any = True
) -> Resolution:
    if flavor == "sync":
        return resolve(ledger, pending, approved=approved)
    return asyncio.run(resolve_async(ledger, pending, approved=approved))


def do_decided(flavor: str, ledger: object, pending: PendingRequest) -> Resolution | None:
    if flavor == "sync":
        return already_decided(ledger, pending)
    return asyncio.run(already_decided_async(ledger, pending))


def do_close(flavor: str, ledger: object, pending: PendingRequest) -> Closure:
    if flavor == "sync":
        return close_pause(ledger, pending)
    return asyncio.run(close_pause_async(ledger, pending))


def do_landed(flavor: str, ledger: object, request_id: str) -> LandedVerdict:
    if flavor == "sync":
        return spend_landed(ledger, request_id)
    return asyncio.run(spend_landed_async(ledger, request_id))


# H1 ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("result", "verdict"),
    [
        (True, RunVerdict.RUN),
        (False, RunVerdict.REFUSED),
        (1, RunVerdict.REFUSED),
        ("true", RunVerdict.REFUSED),
        (None, RunVerdict.REFUSED),
    ],
)
def test_H1_only_true_runs(result: object, verdict: RunVerdict) -> None:
    assert authorize(result) is verdict


@pytest.mark.parametrize("flavor", FLAVORS)
def test_H1_resolve_runs_once(flavor: str) -> None:
    ledger = make(flavor)
    pending = mint(ledger, "req-1")
    first = do_resolve(flavor, ledger, pending)
    second = do_resolve(flavor, ledger, pending)
    assert first.verdict is ResolveVerdict.RUN
    assert first.may_run
    assert second.verdict is ResolveVerdict.ALREADY_SPENT
    assert not second.may_run


@pytest.mark.parametrize("flavor", FLAVORS)
@pytest.mark.parametrize("value", [1, "yes", None, 0])
def test_H1_non_bool_answer_is_refused(flavor: str, value: object) -> None:
    ledger = make(flavor, spend=constant(value))
    resolution = do_resolve(flavor, ledger, mint(ledger, "req"))
    assert resolution.verdict is ResolveVerdict.REFUSED_INVALID
    assert not resolution.may_run


# H2 ---------------------------------------------------------------------------------


@pytest.mark.parametrize("flavor", FLAVORS)
def test_H2_failed_spend_that_never_landed_stays_answerable(flavor: str) -> None:
    outage = LedgerUnavailable("down")
    ledger = make(flavor, spend=raises(outage), is_spent=constant(False))
    resolution = do_resolve(flavor, ledger, mint(ledger, "req"))
    assert resolution.verdict is ResolveVerdict.FAILED_NOT_LANDED
    assert resolution.error is outage
    assert not resolution.may_run


@pytest.mark.parametrize("flavor", FLAVORS)
@pytest.mark.parametrize(
    "is_spent",
    [constant(True), constant(0), constant(None), raises(LedgerUnavailable("down"))],
    ids=["true", "zero", "none", "raises"],
)
def test_H2_anything_but_false_counts_as_spent(flavor: str, is_spent: Any) -> None:
    ledger = make(flavor, spend=raises(LedgerUnavailable("x")), is_spent=is_spent)
    resolution = do_resolve(flavor, ledger, mint(ledger, "req"))
    assert resolution.verdict is ResolveVerdict.FAILED_COUNTS_AS_SPENT
    assert do_landed(flavor, ledger, "req") is LandedVerdict.COUNTS_AS_SPENT


@pytest.mark.parametrize("flavor", FLAVORS)
def test_H2_missing_is_spent_counts_as_spent(flavor: str) -> None:
    ledger = make(flavor, spend=raises(LedgerUnavailable("x")), has_is_spent=False)
    resolution = do_resolve(flavor, ledger, mint(ledger, "req"))
    assert resolution.verdict is ResolveVerdict.FAILED_COUNTS_AS_SPENT


@pytest.mark.parametrize("flavor", FLAVORS)
def test_H2_is_spent_asked_only_after_a_failed_spend(flavor: str) -> None:
    ledger = make(flavor)
    do_resolve(flavor, ledger, mint(ledger, "req"))
    assert ledger.calls == [("spend", "req")]


# H3 ---------------------------------------------------------------------------------


@pytest.mark.parametrize("flavor", FLAVORS)
def test_H3_close_proves_and_records(flavor: str) -> None:
    ledger = make(flavor)
    closure = do_close(flavor, ledger, mint(ledger, "req"))
    assert closure.verdict is CloseVerdict.CLOSED_PROVEN
    assert closure.recorded
    assert ledger.inner.is_spent("req")
    assert ledger.inner.is_marker_spent(closed_proven_marker("req"))


@pytest.mark.parametrize("flavor", FLAVORS)
def test_H3_close_after_a_decision_is_possibly_run(flavor: str) -> None:
    ledger = make(flavor)
    pending = mint(ledger, "req")
    assert do_resolve(flavor, ledger, pending).may_run
    closure = do_close(flavor, ledger, pending)
    assert closure.verdict is CloseVerdict.POSSIBLY_RUN
    assert not ledger.inner.is_marker_spent(closed_proven_marker("req"))


@pytest.mark.parametrize("flavor", FLAVORS)
def test_H3_ledger_without_store_id_never_proves(flavor: str) -> None:
    ledger = make(flavor, store_id=None)
    closure = do_close(flavor, ledger, mint(ledger, "req"))
    assert closure.verdict is CloseVerdict.POSSIBLY_RUN
    assert ledger.calls == []  # nothing is spent without a proof to gain


@pytest.mark.parametrize("flavor", FLAVORS)
def test_H3_failed_closing_spend_is_possibly_run(flavor: str) -> None:
    outage = LedgerUnavailable("down")
    ledger = make(flavor, spend=raises(outage))
    closure = do_close(flavor, ledger, mint(ledger, "req"))
    assert closure.verdict is CloseVerdict.POSSIBLY_RUN
    assert closure.error is outage


@pytest.mark.parametrize("flavor", FLAVORS)
def test_H3_unrecorded_close_is_still_proven(flavor: str) -> None:
    outage = LedgerUnavailable("marker write lost")
    ledger = make(flavor, spend_marker=raises(outage))
    closure = do_close(flavor, ledger, mint(ledger, "req"))
    assert closure.verdict is CloseVerdict.CLOSED_PROVEN
    assert not closure.recorded
    assert closure.error is outage


@pytest.mark.parametrize("flavor", FLAVORS)
def test_H3_ledger_without_marker_space_proves_but_records_nothing(flavor: str) -> None:
    ledger = make(flavor, has_markers=False)
    pending = mint(ledger, "req")
    closure = do_close(flavor, ledger, pending)
    assert closure.verdict is CloseVerdict.CLOSED_PROVEN
    assert not closure.recorded
    assert "spend_marker" in closure.reason
    # Without a record, a retried close cannot claim the proof again: conservative.
    assert do_close(flavor, ledger, pending).verdict is CloseVerdict.POSSIBLY_RUN


def test_H3_long_ids_close_under_their_own_marker() -> None:
    long_id = "x" * MAX_ID_BYTES
    ledger = Scripted()
    assert close_pause(ledger, mint(ledger, long_id)).recorded
    assert closed_proven_marker(long_id) != closed_proven_marker("x" * 1023)


@pytest.mark.parametrize("flavor", FLAVORS)
def test_H3_a_request_named_like_a_marker_forges_no_proof(flavor: str) -> None:
    """A request id equal to another request's old-style marker text is just an id."""
    ledger = make(flavor)
    forged = mint(ledger, "closed-proven:req-1")
    assert do_resolve(flavor, ledger, forged).verdict is ResolveVerdict.RUN
    victim = mint(ledger, "req-1")
    closure = do_close(flavor, ledger, victim)
    assert closure.recorded, closure.reason
    assert ledger.inner.is_spent("req-1")  # the close spent the request itself
    assert do_resolve(flavor, ledger, victim).verdict is ResolveVerdict.CLOSED_BY_HOST


# H4 ---------------------------------------------------------------------------------


@pytest.mark.parametrize("flavor", FLAVORS)
def test_H4_retried_close_keeps_first_verdict(flavor: str) -> None:
    ledger = make(flavor)
    pending = mint(ledger, "req")
    assert do_close(flavor, ledger, pending).proven
    again = do_close(flavor, ledger, pending)
    assert again.verdict is CloseVerdict.CLOSED_PROVEN
    assert again.recorded


@pytest.mark.parametrize("flavor", FLAVORS)
def test_H4_late_answer_is_told_the_host_closed_it(flavor: str) -> None:
    ledger = make(flavor)
    pending = mint(ledger, "req")
    do_close(flavor, ledger, pending)
    late = do_resolve(flavor, ledger, pending)
    assert late.verdict is ResolveVerdict.CLOSED_BY_HOST
    assert not late.may_run


# H5 ---------------------------------------------------------------------------------


@pytest.mark.parametrize("flavor", FLAVORS)
def test_H5_request_minted_under_another_store_is_asked_again(flavor: str) -> None:
    old = make(flavor, store_id="store-A")
    new = make(flavor, store_id="store-B")
    pending = mint(old, "req")
    resolution = do_resolve(flavor, new, pending)
    assert resolution.verdict is ResolveVerdict.LEDGER_CHANGED
    assert new.calls == []  # nothing spent in a ledger the request was not asked under
    closure = do_close(flavor, new, pending)
    assert closure.verdict is CloseVerdict.POSSIBLY_RUN
    assert new.calls == []


def test_rules_validate_ids_before_any_call() -> None:
    ledger = Scripted()
    with pytest.raises(InvalidRequestId):
        resolve(ledger, PendingRequest("", "store-A"), approved=True)
    with pytest.raises(InvalidRequestId):
        close_pause(ledger, PendingRequest("\ud800", "store-A"))
    assert ledger.calls == []


def test_sync_rule_refuses_an_async_ledger() -> None:
    ledger = AsyncScripted()
    with pytest.raises(TypeError, match="_async"):
        resolve(ledger, mint(ledger, "req"), approved=True)


def test_async_rule_accepts_a_sync_ledger() -> None:
    ledger = Scripted()
    assert asyncio.run(resolve_async(ledger, mint(ledger, "req"), approved=True)).may_run


# The person's answer ----------------------------------------------------------------


@pytest.mark.parametrize("flavor", FLAVORS)
def test_a_denial_is_spent_and_never_reads_as_a_run(flavor: str) -> None:
    ledger = make(flavor)
    pending = mint(ledger, "req")
    denied = do_resolve(flavor, ledger, pending, approved=False)
    assert denied.verdict is ResolveVerdict.DENIED
    assert not denied.may_run
    assert denied.decided_here
    late = do_resolve(flavor, ledger, pending, approved=True)  # no later approval runs it
    assert (late.verdict, late.may_run, late.decided_here) == (
        ResolveVerdict.ALREADY_SPENT,
        False,
        False,
    )
    assert Resolution.from_dict(denied.to_dict()) == denied


@pytest.mark.parametrize("flavor", FLAVORS)
@pytest.mark.parametrize("answer", [None, "yes", 1, 0, "false"])
def test_an_answer_that_is_not_a_bool_is_refused_before_any_call(flavor: str, answer: Any) -> None:
    ledger = make(flavor)
    with pytest.raises(InvalidAnswer, match="nothing was spent"):
        do_resolve(flavor, ledger, mint(ledger, "req"), approved=answer)
    assert ledger.calls == []


def test_the_answer_is_a_required_keyword() -> None:
    ledger = Scripted()
    with pytest.raises(TypeError, match="approved"):
        resolve(ledger, mint(ledger, "req"))  # type: ignore[call-arg]
    assert ledger.calls == []


@pytest.mark.parametrize("flavor", FLAVORS)
def test_already_decided_tells_a_question_that_cannot_count(flavor: str) -> None:
    ledger = make(flavor)
    fresh, answered, closed = (mint(ledger, name) for name in ("fresh", "answered", "closed"))
    do_resolve(flavor, ledger, answered, approved=False)
    do_close(flavor, ledger, closed)
    assert do_decided(flavor, ledger, fresh) is None
    assert do_decided(flavor, ledger, answered) == Resolution(ResolveVerdict.ALREADY_SPENT)
    assert do_decided(flavor, ledger, closed) == Resolution(ResolveVerdict.CLOSED_BY_HOST)
    assert do_resolve(flavor, ledger, fresh).may_run  # the check spent nothing


@pytest.mark.parametrize("flavor", FLAVORS)
@pytest.mark.parametrize("answer", [raises(LedgerUnavailable("down")), constant(1)])
def test_already_decided_raises_rather_than_guess(flavor: str, answer: Any) -> None:
    ledger = make(flavor, is_spent=answer)
    with pytest.raises(LedgerError):
        do_decided(flavor, ledger, mint(ledger, "req"))
