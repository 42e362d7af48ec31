"""The shared host glue: request ids, verdict -> action, re-entry wrapping, batches."""

from __future__ import annotations

import pytest

from ledger_agents import (
    DECIDED_BEFORE,
    Action,
    ApprovalNotRecorded,
    NotThisResume,
    decide,
    decide_all,
    derive_request_id,
    reentrant,
)
from ledger_core import (
    MarkerReentry,
    MemoryLedger,
    ResolveVerdict,
    can_reenter,
    mint,
    new_attempt_secret,
)
from ledger_core.ids import MAX_ID_BYTES
from tests.scripted import Scripted, raises


def test_request_ids_are_stable_and_boundaries_cannot_shift() -> None:
    assert derive_request_id("langgraph", "t-1", "call_9") == "langgraph/t-1/call_9"
    assert derive_request_id("x", "a/b", "c") != derive_request_id("x", "a", "b/c")
    assert derive_request_id("x", "a%2Fb", "c") != derive_request_id("x", "a/b", "c")
    long = derive_request_id("x", "t" * 2000, "c")
    assert long.startswith("x/sha256/")
    assert len(long.encode()) <= MAX_ID_BYTES
    assert long == derive_request_id("x", "t" * 2000, "c")
    with pytest.raises(ValueError, match="non-empty"):
        derive_request_id("x", "", "c")


def test_every_verdict_maps_to_an_action() -> None:
    ledger = Scripted()
    pending = mint(ledger, "r")
    assert decide(ledger, pending, True).action is Action.RUN
    again = decide(ledger, pending, True)
    assert (again.action, again.resolution.verdict) == (Action.REFUSE, ResolveVerdict.ALREADY_SPENT)
    denied = decide(ledger, mint(ledger, "d"), False)
    assert (denied.action, denied.message) == (Action.REFUSE, "The person denied this call.")
    moved = decide(Scripted(store_id="store-B"), pending, True)
    assert moved.action is Action.ASK_AGAIN


def test_a_spend_that_did_not_land_keeps_the_pause_open() -> None:
    ledger = Scripted(spend=raises(TimeoutError("lost")))
    with pytest.raises(ApprovalNotRecorded) as caught:
        decide(ledger, mint(ledger, "r"), True)
    assert isinstance(caught.value.__cause__, TimeoutError)


def test_reentrant_wraps_only_ledgers_with_markers_and_no_spend_as() -> None:
    memory = MemoryLedger()
    assert reentrant(memory) is memory  # C10 built in
    scripted = Scripted()
    assert isinstance(reentrant(scripted), MarkerReentry)
    bare = Scripted(has_markers=False)
    assert reentrant(bare) is bare
    assert not can_reenter(bare)


def test_a_batch_asks_again_before_spending_anything() -> None:
    old = Scripted(store_id="A")
    records = {"c1": mint(old, "r1").to_dict(), "c2": mint(old, "r2").to_dict()}
    new = Scripted(store_id="B")
    batch = decide_all(new, records, {"c1": True, "c2": True})
    assert set(batch.ask_again) == {"c1", "c2"}
    assert [call for call in new.calls if call[0] != "is_spent"] == []  # read, not spent
    ok = decide_all(new, batch.ask_again, {"c1": True, "c2": False})
    assert [d.action for d in ok.decisions.values()] == [Action.RUN, Action.REFUSE]
    with pytest.raises(NotThisResume):
        decide_all(new, batch.ask_again, {"c1": True}, attempt_secret=new_attempt_secret())
    with pytest.raises(KeyError, match="never minted"):
        decide_all(new, records, {"c3": True})


def test_an_ask_again_record_already_spent_in_the_new_store_is_marked() -> None:
    """A -> B where B already decided the request (A -> B -> A, or a reused id): the
    re-ask is not a question that could count, so its record says so."""
    old, new = Scripted(store_id="A"), Scripted(store_id="B")
    records = {"c1": mint(old, "r1").to_dict(), "c2": mint(old, "r2").to_dict()}
    new.inner.spend("r2")
    batch = decide_all(new, records, {"c1": True, "c2": True})
    assert "decided" not in batch.ask_again["c1"]
    assert batch.ask_again["c2"]["decided"] == "already-spent"
    again = decide_all(new, batch.ask_again, {"c1": True})  # c2 needs no answer
    assert again.decisions["c1"].run
    assert again.decisions["c2"].message == DECIDED_BEFORE
    assert [call for call in new.calls if call[0] == "spend"] == [("spend", "r1")]
