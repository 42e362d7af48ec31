"""C6 per namespace on the MongoDB this machine offers (nx-27017 in CI), sync and async.

Deleting every document of one namespace (its genesis included), or of the whole
collection, keeps the collection and its UUID. Every operation of every open instance
then fails closed: reads find no genesis beside the records, writes read it back after
the write, listing pages read it after the page. Before: ``spent_ids`` answered ``[]``
and ``namespaces`` left the namespace out, under the old ``store_id`` (and, where a
collection UUID guarded the spend, MongoDB >= 6.0, a spent id answered ``True`` again:
pinned against scripted replies in ``test_decisions``).
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from pymongo import MongoClient

from ledger_core.errors import UnsafeStoreConfig
from tests.flavors import Flavored
from tests.mongodb.conftest import _db
from tests.mongodb.scripted import LoseReplies
from tests.mongodb.test_ledger import _open

KEY = "attempt-key-0123456789"


OPERATIONS: list[tuple[str, Any]] = [
    ("spend", lambda old: old.spend("spent")),
    ("is_spent", lambda old: old.is_spent("spent")),
    ("spend fresh", lambda old: old.spend("fresh")),
    ("spend_as", lambda old: old.run(old.ledger.spend_as("spent", KEY))),
    ("spend_many", lambda old: old.run(old.ledger.spend_many(["spent", "fresh-2"]))),
    ("is_spent_many", lambda old: old.run(old.ledger.is_spent_many(["spent"]))),
    ("spent_ids", lambda old: old.spent_ids()),
    ("namespaces", lambda old: old.collect(old.ledger.namespaces())),
]


@pytest.mark.parametrize("flavor", ["sync", "async"])
@pytest.mark.parametrize("scope", ["one namespace", "whole collection"])
def test_a_forgotten_namespace_fails_closed_on_every_operation(
    ledger_url: str, coll: str, client: MongoClient[dict[str, Any]], flavor: str, scope: str
) -> None:
    """One instance per operation, all opened before the forget: each operation's first
    call after it must notice by itself (an instance that failed closed already raises)."""
    with contextlib.ExitStack() as stack:

        def opened(namespace: str) -> Flavored:
            return stack.enter_context(
                Flavored(flavor, ledger_url, namespace=namespace, collection=coll)
            )

        neighbour = opened("m")
        olds = [opened("n") for _ in OPERATIONS]
        for ledger in (olds[0], neighbour):
            assert ledger.spend("spent") is True
        before = olds[0].store_id
        _db(client)[coll].delete_many({"ns": "n"} if scope == "one namespace" else {})
        for old, (name, call) in zip(olds, OPERATIONS, strict=True):
            with pytest.raises(UnsafeStoreConfig, match="forgot"):
                print(name, call(old))  # shows what answered, should one answer
            with pytest.raises(UnsafeStoreConfig):
                old.is_spent("spent")  # and it stays failed closed
        if scope == "one namespace":
            assert neighbour.spend("spent") is False  # another namespace kept its records
            assert neighbour.collect(neighbour.ledger.namespaces()) == ["m"]
        new = opened("n")
        assert new.store_id not in (None, before)  # a new genesis: a new store_id
        assert new.spend("new-id") is True
        # (The old instances' writes that failed closed may have left their records in
        # the new store, where they read as spent: a refusal, never a second run.)


def test_reads_fetch_the_genesis_last(ledger_url: str, coll: str) -> None:
    """The order that makes one ``find`` a proof even if it yields between documents."""
    with _open(ledger_url, namespace="n", collection=coll) as ledger:
        assert ledger.spend_many(["a", "b"]) == [True, True]
        replies: list[Any] = []

        class Kept(LoseReplies):
            def command(self, *args: Any, **kwargs: Any) -> Any:
                replies.append(super().command(*args, **kwargs))
                return replies[-1]

        ledger._db = Kept(ledger._db, set())
        assert ledger.is_spent_many(["b", "a", "none"]) == [True, True, False]
        docs = replies[-1]["cursor"]["firstBatch"]
        assert [doc["_id"] == "genesis\x00n" for doc in docs] == [False, False, True]
