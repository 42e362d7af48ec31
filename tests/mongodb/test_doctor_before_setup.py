"""``decision-ledger doctor`` on a MongoDB ledger not set up yet: the server's settings are
read and judged as an open judges them, and nothing is written (no collection, no
genesis, no key probe).

Before: exit 3 with one error line, so a fresh server could not be vetted before
anything was written to it."""

from __future__ import annotations

from typing import Any

import pytest
from pymongo import MongoClient

from ledger_core.cli import main
from tests.mongodb.conftest import _db
from tests.servers import mongodb as servers

Capture = pytest.CaptureFixture[str]


def _url(base: str, extra: str) -> str:
    return base + ("&" if "?" in base else "?") + extra


def test_a_missing_collection_is_vetted_before_setup(
    ledger_url: str, coll: str, client: MongoClient[dict[str, Any]], capsys: Capture
) -> None:
    assert main(["doctor", _url(ledger_url, f"collection={coll}")]) == 1
    out = capsys.readouterr().out
    assert f"MongoDB collection '{coll}' does not exist yet" in out
    assert "PASS  versions" in out
    assert "no collection yet: setup creates a plain collection, collation simple" in out
    assert "write concern w: majority, j: true on every write" in out
    assert "1 check(s) failed" in out  # the store, and only it
    assert coll not in _db(client).list_collection_names()  # the doctor never creates


def test_a_missing_namespace_reads_its_collection_and_writes_nothing(
    ledger_url: str, coll: str, client: MongoClient[dict[str, Any]], capsys: Capture
) -> None:
    _db(client).create_collection(coll)
    url = _url(ledger_url, f"collection={coll}")
    assert main(["doctor", url, "--namespace", "fresh"]) == 1
    out = capsys.readouterr().out
    assert "namespace 'fresh' (its genesis document)" in out
    assert "PASS  configuration  a plain collection, collation simple, no TTL index" in out
    assert "1 check(s) failed" in out
    assert _db(client)[coll].count_documents({}) == 0  # no genesis, no key probe


def test_an_unsafe_setting_fails_before_setup(
    mongo: servers.Found, coll: str, client: MongoClient[dict[str, Any]], capsys: Capture
) -> None:
    """A collection whose collation compares loosely, or (nx-27017) a journal that cannot
    promise a power loss without ``durability=process``: its own failed line."""
    _db(client).create_collection(coll, collation={"locale": "en", "strength": 2})
    url = _url(mongo.url, f"collection={coll}")
    assert main(["doctor", url, "--namespace", "fresh"]) == 1
    out = capsys.readouterr().out
    if mongo.nx:  # nx-27017 keeps no collation: its journal line fails instead
        assert "FAIL  configuration  nx-27017 cannot promise" in out
    else:
        assert "FAIL  configuration  the collection's collation is 'en'" in out
    assert "2 check(s) failed" in out


def test_an_unreachable_server_is_exit_3(capsys: Capture) -> None:
    url = "mongodb://user:pw-secret@127.0.0.1:1/db?directConnection=true&timeout=0.3"
    assert main(["doctor", url]) == 3
    assert "pw-secret" not in "".join(capsys.readouterr())
