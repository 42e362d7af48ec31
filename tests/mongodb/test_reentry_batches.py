"""C10 re-entry (one ``findAndModify``), batched spends and reads, and namespace listing
on the MongoDB this machine offers (nx-27017 in CI), sync and async."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from pymongo import MongoClient

from ledger_core.errors import AmbiguousSpend, LedgerError
from ledger_core.ids import closed_proven_marker
from tests import reentry
from tests.flavors import Flavored
from tests.mongodb.conftest import _db
from tests.mongodb.scripted import losing
from tests.mongodb.test_ledger import _open

RACE_ROUNDS = 20


@pytest.fixture(params=["sync", "async"])
def ledger(request: pytest.FixtureRequest, ledger_url: str, coll: str) -> Iterator[Flavored]:
    with Flavored(request.param, ledger_url, namespace="n", collection=coll) as opened:
        yield opened


def test_spend_as_reenters_only_the_winner(ledger: Flavored) -> None:
    reentry.check_reentry(ledger)


def test_racing_attempts_exactly_one_wins(ledger: Flavored) -> None:
    reentry.check_race(ledger, RACE_ROUNDS)


def _raw_race(clients: list[MongoClient[dict[str, Any]]], coll: str, key: str) -> list[Any]:
    """Each client's upsert of ``key`` under its own digest (the form ``spend_as``
    sends), all released at once: each reply."""
    barrier = threading.Barrier(len(clients))
    replies: list[Any] = []

    def upsert(client: MongoClient[dict[str, Any]], me: int) -> None:
        query = {"_id": key, "ns": "n", "d": f"{me:064x}"}
        barrier.wait()
        replies.append(
            _db(client).command(
                {
                    "update": coll,
                    "updates": [{"q": query, "u": {"$setOnInsert": {"t": me}}, "upsert": True}],
                }
            )
        )

    threads = [threading.Thread(target=upsert, args=(c, i)) for i, c in enumerate(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return replies


def test_server_upsert_is_atomic(mongo_url: str, coll: str) -> None:
    """The form spend_as uses, raw, from 16 clients released at once on each id under
    distinct digests: exactly one inserts, every other meets its duplicate key (nx-27017
    runs each command under its database's lock; MongoDB's ``_id`` index is unique)."""
    clients: list[MongoClient[dict[str, Any]]] = [
        MongoClient(mongo_url, serverSelectionTimeoutMS=5000) for _ in range(16)
    ]
    try:
        for n in range(RACE_ROUNDS):
            replies = _raw_race(clients, coll, f"id-{n}")
            assert sum(1 for r in replies if r.get("upserted")) == 1, replies
            codes = [e["code"] for r in replies for e in r.get("writeErrors") or []]
            assert codes == [11000] * (len(clients) - 1), replies
    finally:
        for client in clients:
            client.close()


def test_spend_as_lost_reply_is_settled(ledger_url: str, coll: str) -> None:
    """C5: the write landed and its reply was lost: the same command again says ours."""
    with _open(ledger_url, namespace="n", collection=coll) as ledger:
        ledger.spend("warm")  # the migration check is behind it
        with losing(ledger, {1}):
            assert ledger.spend_as("landed", reentry.KEYS[0]) is True
        assert ledger.spend_as("landed", reentry.KEYS[1]) is False
        assert ledger.spend_as("landed", reentry.KEYS[0]) is True


def test_spend_as_lost_request_on_anothers_record_is_false(ledger_url: str, coll: str) -> None:
    with _open(ledger_url, namespace="n", collection=coll) as ledger:
        assert ledger.spend_as("theirs", reentry.KEYS[1]) is True
        with losing(ledger, set(), drop={1}):
            assert ledger.spend_as("theirs", reentry.KEYS[0]) is False


def test_spend_as_unsettled_is_ambiguous(ledger_url: str, coll: str) -> None:
    with _open(ledger_url, namespace="n", collection=coll) as ledger:
        ledger.spend("warm")  # the migration check is behind it
        with losing(ledger, {1}, drop={2, 3, 4}), pytest.raises(AmbiguousSpend):
            ledger.spend_as("unknown", reentry.KEYS[0])
        assert ledger.spend_as("unknown", reentry.KEYS[0]) is True  # it had landed


def test_spend_as_fails_closed_on_a_dropped_collection(
    ledger_url: str, mongo_url: str, coll: str
) -> None:
    client: MongoClient[dict[str, Any]] = MongoClient(mongo_url, serverSelectionTimeoutMS=5000)
    try:
        with _open(ledger_url, namespace="n", collection=coll) as ledger:
            assert ledger.spend_as("x", reentry.KEYS[0]) is True
            _db(client).drop_collection(coll)
            with pytest.raises(LedgerError, match="forgot"):
                ledger.spend_as("x", reentry.KEYS[0])  # the upsert lands in a new collection
    finally:
        client.close()


def test_spend_many_answers_per_id(ledger: Flavored) -> None:
    ledger.ledger.BATCH = 3
    assert ledger.spend("old") is True
    ids = ["a", "b", "a", "old", "c", "d", "e", "x" * 1024, "d"]
    won = ledger.run(ledger.ledger.spend_many(ids))
    assert won == [True, True, False, False, True, True, True, True, False]
    assert ledger.run(ledger.ledger.spend_many(["a", "f"])) == [False, True]
    assert ledger.run(ledger.ledger.is_spent_many([*ids, "f", "nope"])) == [True] * 10 + [False]
    assert ledger.spend("e") is False
    assert sorted(ledger.spent_ids()) == sorted({*ids, "f"})


def test_spend_many_lost_reply_is_settled(ledger_url: str, coll: str) -> None:
    """The batch landed and its reply was lost: the same documents again, then one read
    of the tokens: ours are True, another spend's are False."""
    with _open(ledger_url, namespace="n", collection=coll) as ledger:
        assert ledger.spend("theirs") is True
        with losing(ledger, {1}):
            assert ledger.spend_many(["m1", "theirs", "m2"]) == [True, False, True]
        with losing(ledger, {1}, drop={2, 3}), pytest.raises(AmbiguousSpend):
            ledger.spend_many(["m3"])
        assert ledger.is_spent("m3") is True


def test_batched_reads_prove_the_genesis(ledger_url: str, mongo_url: str, coll: str) -> None:
    client: MongoClient[dict[str, Any]] = MongoClient(mongo_url, serverSelectionTimeoutMS=5000)
    try:
        with _open(ledger_url, namespace="n", collection=coll) as ledger:
            assert ledger.spend_many(["x", "y"]) == [True, True]
            _db(client)[coll].delete_many({})
            with pytest.raises(LedgerError, match="forgot"):
                ledger.is_spent_many(["x", "y"])
    finally:
        client.close()


def test_namespaces_lists_each_once(ledger_url: str, coll: str) -> None:
    names = ["n", "a", "b:c", "é", "z" * 256, "genesis", "1"]
    for name in names:
        with _open(ledger_url, namespace=name, collection=coll) as opened:
            opened.spend("x")
            opened.spend_marker(closed_proven_marker("x"))
    with _open(ledger_url, namespace="empty", collection=coll):
        pass  # a genesis and no record: a namespace all the same
    for flavor in ("sync", "async"):
        with Flavored(flavor, ledger_url, namespace="n", collection=coll) as opened:
            opened.ledger.LIST_PAGE = 2
            listed = reentry.namespaces(opened)
            assert sorted(listed) == sorted([*names, "empty"])
