"""The spend and read decisions against scripted server replies (no I/O): what every
answer or driver exception leads to, for the sync and async ledgers alike."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from pymongo.errors import AutoReconnect, OperationFailure, ServerSelectionTimeoutError

from ledger_core.errors import AmbiguousSpend, LedgerUnavailable, UnsafeStoreConfig
from ledger_core.ids import ledger_key
from tests.mongodb.scripted import GENESIS, GENESIS_KEY, UUID, Answer, ScriptedLedger, batch

KEY = ledger_key("n", b"id")


@pytest.fixture(params=["sync", "async"])
def flavor(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def opened(flavor: str) -> Iterator[Any]:
    """``opened(uuid)``: a scripted ledger of this flavour, disposed after the test."""
    made: list[ScriptedLedger] = []

    def make(uuid: Any = UUID) -> ScriptedLedger:
        made.append(ScriptedLedger(flavor, uuid))
        return made[-1]

    yield make
    for ledger in made:
        ledger.dispose()


def found(token: Any, genesis: bytes = GENESIS) -> dict[str, Any]:
    """A read's reply: the record (when ``token`` is not None) and the genesis, last."""
    docs: list[dict[str, Any]] = [{"_id": GENESIS_KEY, "g": genesis}]
    if token is not None:
        docs.insert(0, {"_id": KEY, "t": token})
    return batch(*docs)


def spend(ledger: ScriptedLedger, *answers: Answer) -> tuple[bool, list[str]]:
    """A spend of ``id`` whose commands get ``answers``: the answer, the commands sent."""
    ledger.client.push(*answers)
    ledger.client.seen.clear()
    result = ledger.spend("id")
    return result, ledger.client.seen


OK = {"ok": 1, "n": 1}
DUP = {"ok": 1, "n": 0, "writeErrors": [{"index": 0, "code": 11000}]}
WCE = {"ok": 1, "n": 1, "writeConcernError": {"code": 64, "errmsg": "waiting"}}
OTHER = b"x" * 16


TOKEN = b"t" * 16


@pytest.fixture(autouse=True)
def _tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every spend's token is ``TOKEN``, so a scripted reply can carry it."""
    for module in ("ledger_mongodb.aio", "ledger_mongodb.ledger"):
        monkeypatch.setattr(f"{module}.new_token", lambda: TOKEN)


@pytest.mark.parametrize("uuid", [UUID, None], ids=["collectionUUID", "no uuid"])
def test_the_genesis_is_read_back_after_every_write(opened: Any, uuid: Any) -> None:
    """Before: with a collection UUID a spend was the insert alone, so after a
    ``deleteMany`` of the namespace (the collection and its UUID stay) a spent id
    answered ``True`` again until the next re-check."""
    assert spend(opened(uuid), OK, found(TOKEN)) == (True, ["insert", "find"])
    assert spend(opened(uuid), DUP, found(OTHER)) == (False, ["insert", "find"])
    gone: list[dict[str, Any]] = [found(TOKEN, genesis=b"other"), batch()]
    for reply in gone:
        ledger = opened(uuid)
        with pytest.raises(UnsafeStoreConfig, match="forgot"):
            spend(ledger, OK, reply)
        with pytest.raises(UnsafeStoreConfig):
            spend(ledger)  # failed closed for good: no command at all
        assert ledger.client.seen == []


def test_every_write_carries_its_guarantees(opened: Any) -> None:
    """Majority, journaled; the collection UUID where there is one; the read after it
    at read concern majority, the genesis last (BinData keys sort after text)."""
    ledger = opened(UUID)
    spend(ledger, OK, found(TOKEN))
    insert, read = ledger.client.sent
    assert insert["writeConcern"] == {"w": "majority", "j": True}
    assert insert["collectionUUID"] == UUID
    assert read["collectionUUID"] == UUID
    assert insert["documents"] == [{"_id": KEY, "t": TOKEN, "ns": "n"}]
    assert read["readConcern"] == {"level": "majority"}
    assert read["filter"] == {"_id": {"$in": [KEY, GENESIS_KEY]}}
    assert read["sort"] == {"_id": -1}
    plain = opened(None)
    spend(plain, OK, found(TOKEN))
    assert all("collectionUUID" not in sent for sent in plain.client.sent)


def test_write_concern_error_is_settled_by_reading(opened: Any) -> None:
    assert spend(opened(), WCE, found(TOKEN))[0] is True
    assert spend(opened(), WCE, found(OTHER))[0] is False
    with pytest.raises(AmbiguousSpend):
        spend(opened(), WCE, found(None))


def test_lost_reply_resends_the_same_document(opened: Any) -> None:
    lost = AutoReconnect("reset")
    assert spend(opened(), lost, OK, found(TOKEN)) == (True, ["insert", "insert", "find"])
    ledger = opened()
    assert spend(ledger, lost, DUP, found(TOKEN)) == (True, ["insert", "insert", "find"])
    first, again, _ = ledger.client.sent
    assert again is first  # the same document, the same token
    assert spend(opened(), lost, DUP, found(OTHER))[0] is False
    with pytest.raises(AmbiguousSpend):
        spend(opened(), lost, lost)


def test_never_sent_is_unavailable_not_ambiguous(opened: Any) -> None:
    with pytest.raises(LedgerUnavailable) as failure:
        spend(opened(), ServerSelectionTimeoutError("no primary"))
    assert not isinstance(failure.value, AmbiguousSpend)


@pytest.mark.parametrize(
    "answer",
    [
        OperationFailure("uuid mismatch", code=361),
        {"ok": 1, "n": 0, "writeErrors": [{"index": 0, "code": 361}]},
    ],
)
def test_replaced_collection_fails_closed_for_good(opened: Any, answer: Answer) -> None:
    ledger = opened()
    with pytest.raises(UnsafeStoreConfig, match="dropped or replaced"):
        spend(ledger, answer)
    with pytest.raises(UnsafeStoreConfig):
        spend(ledger)  # no command at all: failed closed
    with pytest.raises(UnsafeStoreConfig):
        ledger.is_spent("id")
    assert ledger.client.seen == []


def test_read_proves_the_genesis(opened: Any) -> None:
    ledger = opened()
    ledger.client.push(found(None))
    assert ledger.is_spent("id") is False
    ledger.client.push(batch())
    with pytest.raises(UnsafeStoreConfig, match="genesis"):
        ledger.is_spent("id")


def test_a_hex_keyed_read_sorts_the_genesis_last() -> None:
    """BSON sorts text (the genesis ``_id``) before BinData (MongoDB's keys), and hex
    digits before ``g`` (nx-27017's text keys): the sort puts the genesis last either way."""
    hex_key = KEY.hex()
    assert hex_key < GENESIS_KEY
    ledger = ScriptedLedger("sync")
    try:
        ledger.ledger._binary = False  # as a genesis recording "hex" opens it
        ledger.client.push(batch({"_id": hex_key, "t": OTHER}, {"_id": GENESIS_KEY, "g": GENESIS}))
        assert ledger.is_spent("id") is True
        assert ledger.client.sent[0]["sort"] == {"_id": 1}
    finally:
        ledger.dispose()


@pytest.mark.parametrize("listing", ["spent_ids", "namespaces"])
def test_a_listing_page_is_followed_by_the_genesis(opened: Any, listing: str) -> None:
    """Before: a page of a namespace whose documents were deleted answered ``[]``."""
    ledger = opened()
    ledger.client.push(batch(), batch())
    with pytest.raises(UnsafeStoreConfig, match="genesis"):
        ledger.collect(getattr(ledger.ledger, listing)())
    assert ledger.client.seen == ["find", "find"]
    ledger = opened()
    ledger.client.push(batch(), found(None))
    assert ledger.collect(getattr(ledger.ledger, listing)()) == []


def test_a_member_that_is_no_longer_primary_is_refused_not_forgotten(opened: Any) -> None:
    ledger = opened()
    guard = ledger.ledger._guard
    guard.again()
    ledger.client.push({"ok": 1, "isWritablePrimary": False, "secondary": True})
    with pytest.raises(UnsafeStoreConfig, match="not a writable primary"):
        ledger.is_spent("id")
    assert ledger.client.seen == ["hello"]
    assert guard.failed is None  # a later call re-checks, and works once a primary answers
    assert guard.due()


def test_reidentify_replaces_the_genesis_it_opened_then_fails_closed(opened: Any) -> None:
    """One majority update matched on the genesis this ledger read (C6, after a restore):
    every instance, this one included, then fails closed; a genesis already gone or
    another is a forgotten store, not a fresh identity."""
    ledger = opened()
    ledger.client.push({"ok": 1, "n": 1, "nModified": 1})
    ledger.run(ledger.ledger.reidentify())
    (update,) = ledger.client.sent
    assert update["updates"][0]["q"] == {"_id": GENESIS_KEY, "g": GENESIS}
    assert update["writeConcern"] == {"w": "majority", "j": True}
    with pytest.raises(UnsafeStoreConfig, match="reidentify replaced it"):
        ledger.is_spent("id")
    gone = opened()
    gone.client.push({"ok": 1, "n": 0, "nModified": 0})
    with pytest.raises(UnsafeStoreConfig, match="gone or different"):
        gone.run(gone.ledger.reidentify())
