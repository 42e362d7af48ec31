"""The spend and read decisions against scripted server replies (no I/O): what every
answer or driver exception leads to, for the sync and async shells alike."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from bson.binary import UUID_SUBTYPE, Binary
from pymongo.errors import AutoReconnect, OperationFailure, ServerSelectionTimeoutError

from ledger_core.errors import AmbiguousSpend, LedgerUnavailable, UnsafeStoreConfig
from ledger_core.guard import Guard
from ledger_core.protocol import LedgerInfo
from ledger_core.steps import run_steps
from ledger_mongodb import commands as cmd
from ledger_mongodb import decisions
from ledger_mongodb.options import Settings

UUID = Binary(bytes(range(16)), UUID_SUBTYPE)
GENESIS = b"g" * 16
TOKEN = b"t" * 16
KEY = cmd.record_key("n", b"id", cmd.BIN)


def store(uuid: Any = UUID) -> decisions.Store:
    return decisions.Store(
        settings=Settings(namespace="n", collection="c", recheck=3600),
        info=LedgerInfo(backend="mongodb", store_id="s"),
        uuid=uuid,
        genesis_key=cmd.genesis_key("n"),
        genesis=GENESIS,
        encoding=cmd.BIN,
        shape=(),
        guard=Guard(3600, now=10**9),
    )


def found(token: bytes | None, genesis: bytes = GENESIS) -> dict[str, Any]:
    docs: list[dict[str, Any]] = [{"_id": cmd.genesis_key("n"), "g": genesis}]
    if token is not None:
        docs.append({"_id": bytes(KEY), "t": token})
    return {"cursor": {"firstBatch": docs}}


Answer = dict[str, Any] | BaseException


def script(*answers: Answer) -> tuple[Callable[[cmd.Request], Any], list[str]]:
    seen: list[str] = []
    queue: Iterator[Answer] = iter(answers)

    def perform(request: cmd.Request) -> Any:
        seen.append(request.what)
        answer = next(queue)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    return perform, seen


def spend(s: decisions.Store, *answers: Answer) -> tuple[bool, list[str]]:
    perform, seen = script(*answers)
    result: bool = run_steps(decisions.spend_steps(s, b"id", TOKEN, 0.0), perform)
    return result, seen


OK = {"ok": 1, "n": 1}
DUP = {"ok": 1, "n": 0, "writeErrors": [{"index": 0, "code": 11000}]}
WCE = {"ok": 1, "n": 1, "writeConcernError": {"code": 64, "errmsg": "waiting"}}


@pytest.mark.parametrize("uuid", [UUID, None], ids=["collectionUUID", "no uuid"])
def test_the_genesis_is_read_back_after_every_write(uuid: Any) -> None:
    """Before: with a collection UUID a spend was the insert alone, so after a
    ``deleteMany`` of the namespace (the collection and its UUID stay) a spent id
    answered ``True`` again until the next re-check."""
    assert spend(store(uuid), OK, found(TOKEN)) == (True, ["spend", "spend (verify)"])
    assert spend(store(uuid), DUP, found(b"x" * 16)) == (False, ["spend", "spend (verify)"])
    gone: list[dict[str, Any]] = [found(TOKEN, genesis=b"other"), {"cursor": {"firstBatch": []}}]
    for reply in gone:
        s = store(uuid)
        with pytest.raises(UnsafeStoreConfig, match="forgot"):
            spend(s, OK, reply)
        with pytest.raises(UnsafeStoreConfig):
            spend(s)  # failed closed for good: no request at all


def test_write_concern_error_is_settled_by_reading() -> None:
    assert spend(store(), WCE, found(TOKEN))[0] is True
    assert spend(store(), WCE, found(b"someone else"))[0] is False
    with pytest.raises(AmbiguousSpend):
        spend(store(), WCE, found(None))


def test_lost_reply_resends_the_same_document() -> None:
    lost = AutoReconnect("reset")
    assert spend(store(), lost, OK, found(TOKEN)) == (
        True,
        ["spend", "spend (resolve)", "spend (resolve)"],
    )
    ours = spend(store(), lost, DUP, found(TOKEN))
    assert ours == (True, ["spend", "spend (resolve)", "spend (resolve)"])
    assert spend(store(), lost, DUP, found(b"x" * 16))[0] is False
    with pytest.raises(AmbiguousSpend):
        spend(store(), lost, lost)


def test_never_sent_is_unavailable_not_ambiguous() -> None:
    with pytest.raises(LedgerUnavailable) as failure:
        spend(store(), ServerSelectionTimeoutError("no primary"))
    assert not isinstance(failure.value, AmbiguousSpend)


@pytest.mark.parametrize(
    "answer",
    [
        OperationFailure("uuid mismatch", code=361),
        {"ok": 1, "n": 0, "writeErrors": [{"index": 0, "code": 361}]},
    ],
)
def test_replaced_collection_fails_closed_for_good(answer: Answer) -> None:
    s = store()
    with pytest.raises(UnsafeStoreConfig, match="dropped or replaced"):
        spend(s, answer)
    with pytest.raises(UnsafeStoreConfig):
        spend(s)  # no request at all: failed closed
    perform, seen = script()
    with pytest.raises(UnsafeStoreConfig):
        run_steps(decisions.is_spent_steps(s, b"id", 0.0), perform)
    assert seen == []


def test_read_proves_the_genesis() -> None:
    perform, _ = script(found(None))
    assert run_steps(decisions.is_spent_steps(store(), b"id", 0.0), perform) is False
    perform, _ = script({"cursor": {"firstBatch": []}})
    with pytest.raises(UnsafeStoreConfig, match="genesis"):
        run_steps(decisions.is_spent_steps(store(), b"id", 0.0), perform)


def test_the_genesis_is_read_last() -> None:
    """BSON sorts text (the genesis ``_id``) before BinData (MongoDB's keys), and hex digits
    before ``g`` (nx-27017's text keys): the sort puts the genesis last either way."""
    genesis = cmd.genesis_key("n")
    assert cmd.read_many("c", [KEY], genesis, UUID, "r", cmd.BIN).command["sort"] == {"_id": -1}
    hex_key = cmd.record_key("n", b"id", cmd.HEX)
    assert hex_key < genesis
    assert cmd.read_many("c", [hex_key], genesis, None, "r", cmd.HEX).command["sort"] == {"_id": 1}


@pytest.mark.parametrize("listing", ["spent_ids", "namespaces"])
def test_a_listing_page_is_followed_by_the_genesis(listing: str) -> None:
    """Before: a page of a namespace whose documents were deleted answered ``[]``."""
    steps = {"spent_ids": decisions.list_steps, "namespaces": decisions.namespace_steps}
    empty: dict[str, Any] = {"cursor": {"firstBatch": []}}
    perform, seen = script(empty, empty)
    s = store()
    with pytest.raises(UnsafeStoreConfig, match="genesis"):
        run_steps(steps[listing](s, None, 0.0), perform)
    assert seen == [listing, f"{listing} (verify)"]
    perform, _ = script(empty, found(None))
    assert run_steps(steps[listing](store(), None, 0.0), perform) == ([], None)


def test_a_member_that_is_no_longer_primary_is_refused_not_forgotten() -> None:
    s = store()
    s.guard.again()
    perform, seen = script({"ok": 1, "isWritablePrimary": False, "secondary": True})
    with pytest.raises(UnsafeStoreConfig, match="not a writable primary"):
        run_steps(decisions.is_spent_steps(s, b"id", 1.0), perform)
    assert seen == ["hello"]
    assert s.guard.failed is None  # a later call re-checks, and works once a primary answers
    assert s.guard.due(1.0)
