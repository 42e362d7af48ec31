"""MongoDB's ``remove_scratch`` hook: a check's genesis documents first (by ``_id``
range), then its records (by ``ns``, an escaped anchored regex); every other document
stays."""

from __future__ import annotations

from typing import Any

import pytest
from pymongo import MongoClient

from ledger_core.errors import LedgerUnavailable
from tests.scratch_removal import exercise, fill, inside, new_prefix, refuses, remove

from .conftest import _db


def _url(ledger_url: str, coll: str) -> str:
    return f"{ledger_url}{'&' if '?' in ledger_url else '?'}collection={coll}"


def test_removes_exactly_the_scratch_namespaces(ledger_url: str, coll: str) -> None:
    exercise(_url(ledger_url, coll))


def test_removes_every_document_of_them(
    ledger_url: str, coll: str, client: MongoClient[dict[str, Any]]
) -> None:
    url, prefix = _url(ledger_url, coll), new_prefix()
    for name in inside(prefix):
        fill(url, name, prefix)
    documents = _db(client)[coll]
    theirs = {"ns": {"$in": inside(prefix)}}
    assert documents.count_documents(theirs) >= 3 * len(inside(prefix))
    assert remove(url, prefix) == len(inside(prefix))
    assert documents.count_documents(theirs) == 0


def test_refuses_any_other_prefix(ledger_url: str, coll: str) -> None:
    refuses(_url(ledger_url, coll))


def test_never_creates_the_collection(
    ledger_url: str, coll: str, client: MongoClient[dict[str, Any]]
) -> None:
    with pytest.raises(LedgerUnavailable, match="no ledger collection"):
        remove(_url(ledger_url, coll), new_prefix())
    assert coll not in _db(client).list_collection_names()


def test_genesis_documents_go_before_any_record() -> None:
    """A ledger open on a scratch namespace fails closed before any record of it goes:
    the genesis documents are the first delete (issue 37); the count is theirs."""
    from ledger_mongodb.testing import remove_scratch_in

    deletes: list[dict[str, Any]] = []

    class Database:
        def command(self, command: dict[str, Any]) -> Any:
            if "listCollections" in command:
                return {"cursor": {"firstBatch": [{"name": "c"}]}}
            deletes.append(command["deletes"][0]["q"])
            return {"n": 3 if len(deletes) == 1 else 7}

    assert remove_scratch_in(Database(), "c", new_prefix()) == 3
    assert [sorted(q) for q in deletes] == [["_id"], ["g", "ns"]]
