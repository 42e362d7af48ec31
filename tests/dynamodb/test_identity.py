"""Identity and refusal rules on DynamoDB's own descriptions (no server needed)."""

from __future__ import annotations

import datetime
from typing import Any

from ledger_core.protocol import Durability, LedgerInfo
from ledger_dynamodb.identity import TableFacts, ledger_info, refusals, server_header
from ledger_dynamodb.options import Settings


def _table(**extra: Any) -> dict[str, Any]:
    return {
        "TableName": "ledger",
        "TableId": "0f1e",
        "TableArn": "arn:aws:dynamodb:eu-west-1:1:table/ledger",
        "TableStatus": "ACTIVE",
        "CreationDateTime": datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc),
        "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
        "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "B"}],
        **extra,
    }


def test_ttl_on_our_attribute_refuses_to_prove() -> None:
    ttl = {"TimeToLiveDescription": {"TimeToLiveStatus": "ENABLED", "AttributeName": "tok"}}
    facts = TableFacts.read(_table(), ttl)
    assert any("Time to Live" in r for r in refusals(facts, Settings(), None))
    other = {"TimeToLiveDescription": {"TimeToLiveStatus": "ENABLED", "AttributeName": "exp"}}
    assert refusals(TableFacts.read(_table(), other), Settings(), None) == []


def test_eventually_consistent_global_table_refuses_strong_one_proves() -> None:
    replicas = [{"RegionName": "eu-west-1"}, {"RegionName": "us-east-1"}]
    eventual = TableFacts.read(_table(Replicas=replicas), {})
    assert any("last writer wins" in r for r in refusals(eventual, Settings(), None))
    strong = TableFacts.read(_table(Replicas=replicas, MultiRegionConsistency="STRONG"), {})
    assert refusals(strong, Settings(), None) == []


def test_store_id_is_the_same_in_any_time_zone() -> None:
    utc = TableFacts.read(_table(), {})
    east = datetime.timezone(datetime.timedelta(hours=9))
    local = _table(CreationDateTime=datetime.datetime(2026, 1, 1, 9, tzinfo=east))
    info_a = ledger_info(utc, b"g" * 16, Settings(), location="x", endpoint_url=None)
    info_b = ledger_info(
        TableFacts.read(local, {}), b"g" * 16, Settings(), location="x", endpoint_url=None
    )
    assert info_a.store_id is not None
    assert info_a.store_id == info_b.store_id


def test_recreated_table_is_a_new_store() -> None:
    a = TableFacts.read(_table(), {})
    b = TableFacts.read(_table(TableId="9999"), {})
    info_a = ledger_info(a, b"g" * 16, Settings(), location="x", endpoint_url=None)
    info_b = ledger_info(b, b"g" * 16, Settings(), location="x", endpoint_url=None)
    assert info_a.store_id != info_b.store_id


def _told_it_persists(facts: TableFacts) -> LedgerInfo:
    """What a ledger told ``durability=process`` makes of a local server's ``facts``."""
    return ledger_info(
        facts,
        b"g" * 16,
        Settings(durability=Durability.PROCESS),
        location="x",
        endpoint_url="http://127.0.0.1:5000",
    )


def test_moto_server_never_proves_even_when_told_it_persists() -> None:
    """moto's server mode: in memory and not atomic under contention (the suite's C1
    fails there), so no store_id even with durability=process."""
    facts = TableFacts.read(_table(), {}, server="Werkzeug/3.1.9 Python/3.11.7, amazon.com")
    info = _told_it_persists(facts)
    assert info.store_id is None
    assert "moto" in (info.reason or "")
    assert info.durability == Durability.NONE


def test_server_header_is_found_in_any_spelling() -> None:
    """Header names are matched in any spelling (servers and HTTP stacks differ)."""
    for name in ("server", "Server", "SERVER"):
        answer = {"ResponseMetadata": {"HTTPHeaders": {name: "Werkzeug/3.1"}}}
        assert server_header(answer) == "Werkzeug/3.1"
    assert server_header({}) == ""


def test_moto_is_recognized_without_its_werkzeug_header() -> None:
    """Through aiobotocore, moto's Server header reads only ``amazon.com``: the async
    ledger claimed a store_id there that the sync one refused (the suite's C6/C9 on moto)."""
    arn = "arn:aws:dynamodb:us-east-1:123456789012:table/ledger"
    facts = TableFacts.read(_table(TableId=None, TableArn=arn), {}, server="amazon.com")
    info = _told_it_persists(facts)
    assert info.store_id is None
    assert "moto" in (info.reason or "")
