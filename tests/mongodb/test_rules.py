"""Options and identity rules without a server: URLs, verdicts, store ids."""

from __future__ import annotations

from typing import Any

import pytest
from bson.binary import UUID_SUBTYPE, Binary

from ledger_core.errors import InvalidLedgerURL
from ledger_core.opening import OpenRequest
from ledger_mongodb.identity import Facts, ledger_info
from ledger_mongodb.options import DEFAULT_COLLECTION, DEFAULT_DATABASE, parse

UUID = Binary(bytes(range(1, 17)), UUID_SUBTYPE)


def _parse(url: str, **options: Any) -> Any:
    return parse(OpenRequest.build(url, **options))


def test_url_keeps_driver_options_and_takes_ours() -> None:
    # Several seeds without ports (ledger_core's URL parser refuses "h1:27017,h2:27017";
    # one seed with replicaSet= is enough: PyMongo discovers the members).
    target = _parse("mongodb://u:pw@h1,h2/app?replicaSet=rs0&collection=spent&w=1")
    assert target.driver_url == "mongodb://u:pw@h1,h2/app?replicaSet=rs0&w=1"
    assert target.database == "app"
    assert target.settings.collection == "spent"
    assert "pw" not in repr(target)
    assert "pw" not in target.location
    assert "replicaSet" not in target.location  # the query may hold secrets: never shown


def test_defaults_and_srv() -> None:
    target = _parse("mongodb+srv://cluster0.example.net/")
    assert (target.database, target.settings.collection) == (DEFAULT_DATABASE, DEFAULT_COLLECTION)
    assert target.client_kwargs()["timeoutMS"] == 5000
    assert target.client_kwargs()["retryWrites"] is False
    own = _parse("mongodb://h/?timeoutMS=900&retryWrites=true")
    assert "timeoutMS" not in own.client_kwargs()  # the URL's own setting wins
    assert "retryWrites" not in own.client_kwargs()


@pytest.mark.parametrize(
    ("url", "options"),
    [
        ("mongodb://h/db", {"bogus": "1"}),
        ("mongodb://h/db", {"timeout": "0"}),
        ("mongodb://h/db", {"create": "maybe"}),
        ("mongodb://h/db", {"collection": "system.users"}),
        ("mongodb://h/bad.name", {}),
    ],
)
def test_refused_options(url: str, options: dict[str, Any]) -> None:
    with pytest.raises(InvalidLedgerURL):
        _parse(url, **options)


def facts(**over: Any) -> Facts:
    base: dict[str, Any] = {
        "hello": {"isWritablePrimary": True, "setName": "rs0"},
        "build": {"version": "7.0.12"},
        "status": {"storageEngine": {"name": "wiredTiger", "persistent": True}},
        "repl": {"settings": {"replicaSetId": "abc"}, "writeConcernMajorityJournalDefault": True},
        "collection": {"name": "c", "type": "collection", "options": {}, "info": {"uuid": UUID}},
        "indexes": [{"name": "_id_", "key": {"_id": 1}}],
    }
    base.update(over)
    return Facts(**base)


def test_replica_set_proves_with_uuid_and_genesis() -> None:
    info = ledger_info(facts(), location="l", namespace="n", genesis=b"\x01" * 16, database="d")
    assert info.store_id is not None
    assert str(UUID.as_uuid()) in info.store_id
    assert "rs:rs0:abc" in info.store_id
    assert info.durability == "machine-crash"


@pytest.mark.parametrize(
    ("over", "reason"),
    [
        ({"status": {"storageEngine": {"name": "inMemory", "persistent": False}}}, "persist"),
        ({"status": None}, "serverStatus"),
        ({"repl": None}, "replSetGetConfig"),
        ({"repl": {"writeConcernMajorityJournalDefault": False}}, "journaled"),
        ({"hello": {"isWritablePrimary": True, "msg": "isdbgrid"}}, "sharded"),
        ({"collection": {"type": "view", "options": {}}}, "view"),
        ({"collection": {"type": "collection", "options": {"capped": True}}}, "capped"),
        (
            {"collection": {"options": {"collation": {"locale": "en", "strength": 2}}}},
            "collation",
        ),
        ({"collection": {"options": {"expireAfterSeconds": 5}}}, "expires"),
        ({"indexes": [{"name": "at_1", "expireAfterSeconds": 3600}]}, "TTL"),
    ],
)
def test_stores_that_can_forget_never_prove(over: dict[str, Any], reason: str) -> None:
    info = ledger_info(facts(**over), location="l", namespace="n", genesis=b"g", database="d")
    assert info.store_id is None
    assert reason in (info.reason or "")


def test_zero_or_text_uuid_means_none() -> None:
    zero = {"options": {}, "info": {"uuid": Binary(bytes(16), UUID_SUBTYPE)}}
    text = {"options": {}, "info": {"uuid": "00000000-0000-0000-0000-000000000000"}}
    assert facts(collection=zero).uuid is None
    assert facts(collection=text).uuid is None
    assert facts().uuid == UUID


def test_distinct_genesis_distinct_store() -> None:
    a = ledger_info(facts(), location="l", namespace="n", genesis=b"a", database="d")
    b = ledger_info(facts(), location="l", namespace="n", genesis=b"b", database="d")
    c = ledger_info(facts(), location="l", namespace="m", genesis=b"a", database="d")
    assert len({a.store_id, b.store_id, c.store_id}) == 3


def test_collection_uuid_guards_commands_from_mongodb_6() -> None:
    assert facts().guard_uuid == UUID
    assert facts(build={"version": "5.0.26"}).guard_uuid is None  # unknown field there
    assert facts(build={"version": "8.0.0-rc1"}).guard_uuid == UUID
