"""DynamoDB's ``remove_scratch`` hook: genesis items by ``begins_with``, deleted first,
then the records of every namespace under the prefix (``begins_with`` the length-prefixed
keys) in batches; every other item stays; a missing table is never created."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from ledger_core.errors import LedgerUnavailable
from ledger_dynamodb import items
from ledger_dynamodb.testing import remove_namespaces
from tests.dynamodb import tools
from tests.scratch_removal import exercise, fill, new_prefix, refuses, remove
from tests.servers import dynamodb as servers

# The whole set on one emulator (dynalite: it starts in a second); the identity, deadline
# and durability tests and the suite run on DynamoDB Local too.
dynamodb_target = tools.on_emulators(servers.DYNALITE)


def test_removes_exactly_the_scratch_namespaces(dynamodb_url: str) -> None:
    exercise(dynamodb_url)


def test_refuses_any_other_prefix(dynamodb_url: str) -> None:
    refuses(dynamodb_url)


def test_never_creates_a_table(dynamodb_url: str) -> None:
    url = dynamodb_url.replace("dynamodb://decision-ledger-test", "dynamodb://no-such-table", 1)
    assert url != dynamodb_url
    with pytest.raises(LedgerUnavailable, match="no-such-table"):
        remove(url, new_prefix())
    with pytest.raises(LedgerUnavailable, match="no-such-table"):
        remove(url.replace("no-such-table", "no-such-table-2"), new_prefix())


def _scan(call: tools.Call, genesis: bytes) -> dict[str, Any]:
    """The genesis item, on segment 0 of a genesis scan; nothing else is stored."""
    first = call.params["ExpressionAttributeValues"][":p0"]["B"]
    found = call.params["Segment"] == 0 and first.startswith(items.GENESIS_PREFIX)
    return {"Items": [{items.KEY: {"B": genesis}}]} if found else {}


def _store(prefix: str, unprocessed: Callable[[int], bool]) -> tools.Scripted:
    """A table holding one scratch genesis item, whose n-th ``BatchWriteItem`` leaves
    its items unprocessed while ``unprocessed(n)``."""
    genesis = items.genesis_key(prefix + "a")
    sent: list[int] = []

    def answer(call: tools.Call) -> Any:
        if call.op == "scan":
            return _scan(call, genesis)
        sent.append(1)
        left = unprocessed(len(sent))
        return {"UnprocessedItems": call.params["RequestItems"] if left else {}}

    return tools.Scripted(answer)


@pytest.fixture(autouse=True)
def no_pauses(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The backoff between sends of unprocessed deletes, recorded instead of slept."""

    pauses: list[float] = []
    monkeypatch.setattr("ledger_dynamodb.testing.time.sleep", pauses.append)
    return pauses


def test_unprocessed_deletes_are_sent_again_until_done(no_pauses: list[float]) -> None:
    prefix, calls = new_prefix(), []

    def unprocessed(n: int) -> bool:
        calls.append(n)
        return n < 3

    assert remove_namespaces(_store(prefix, unprocessed), "t", "here", prefix) == 1
    assert calls == [1, 2, 3]
    assert no_pauses == [0.05, 0.1]  # backing off between sends


def test_unprocessed_deletes_fail_after_a_bound() -> None:
    prefix = new_prefix()
    with pytest.raises(LedgerUnavailable, match="still unprocessed after 8 attempts"):
        remove_namespaces(_store(prefix, lambda n: True), "t", "here", prefix)


def test_genesis_items_go_before_any_record() -> None:
    """A ledger open on a scratch namespace fails closed before any record of it goes:
    the genesis items are the first deletes (issue 37)."""
    prefix = new_prefix()
    genesis = items.genesis_key(prefix + "a")
    record = items.record_prefix(prefix + "a") + b"one"
    deleted: list[list[bytes]] = []

    def answer(call: tools.Call) -> Any:
        if call.op == "scan":
            values = [v["B"] for v in call.params["ExpressionAttributeValues"].values()]
            if call.params["Segment"] != 0:
                return {}
            if any(genesis.startswith(v) for v in values):
                return {"Items": [{items.KEY: {"B": genesis}}]}
            if any(record.startswith(v) for v in values):
                return {"Items": [{items.KEY: {"B": record}}]}
            return {}
        requests = call.params["RequestItems"]["t"]
        deleted.append([r["DeleteRequest"]["Key"][items.KEY]["B"] for r in requests])
        return {}

    assert remove_namespaces(tools.Scripted(answer), "t", "here", prefix) == 1
    assert deleted == [[genesis], [record]]


def test_records_left_without_their_genesis_are_still_removed(dynamodb_url: str) -> None:
    """A removal interrupted after the genesis items: the next one finds the records by
    key, not through the genesis items that are gone."""
    prefix = new_prefix()
    name = prefix + "interrupted"
    fill(dynamodb_url, name, prefix)
    table, _query = tools.url_parts(dynamodb_url)
    admin = tools.admin_client(dynamodb_url)
    try:
        admin.delete_item(TableName=table, Key={items.KEY: {"B": items.genesis_key(name)}})
        assert remove(dynamodb_url, prefix) == 0  # no namespace left to count
        pages = admin.get_paginator("scan").paginate(
            TableName=table,
            ConsistentRead=True,
            FilterExpression=f"begins_with({items.KEY}, :p)",
            ExpressionAttributeValues={":p": {"B": items.record_prefix(name)}},
        )
        assert [item for page in pages for item in page.get("Items", [])] == []
    finally:
        admin.close()
