"""DynamoDB's ``remove_scratch`` hook: genesis items by ``begins_with``, then the records
of those namespaces (``begins_with`` their record prefixes) in batches, then the genesis
items; every other item stays; a missing table is never created."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from ledger_core.errors import LedgerUnavailable
from ledger_dynamodb import commands
from ledger_dynamodb.testing import remove_namespaces
from tests.dynamodb import tools
from tests.scratch_removal import exercise, new_prefix, refuses, remove
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


def _scan(call: commands.Call, genesis: bytes) -> dict[str, Any]:
    """The genesis item, on segment 0 of a genesis scan; nothing else is stored."""
    first = call.params["ExpressionAttributeValues"][":p0"]["B"]
    found = call.params["Segment"] == 0 and first.startswith(commands.GENESIS_PREFIX)
    return {"Items": [{commands.KEY: {"B": genesis}}]} if found else {}


def _store(prefix: str, unprocessed: Callable[[int], bool]) -> Callable[[Any], Any]:
    """A table holding one scratch genesis item, whose n-th ``BatchWriteItem`` leaves
    its items unprocessed while ``unprocessed(n)``."""
    genesis = commands.genesis_key(prefix + "a")
    sent: list[int] = []

    def answer(call: Any) -> Any:
        if isinstance(call, commands.Sleep):
            return None
        if call.op == "scan":
            return _scan(call, genesis)
        sent.append(1)
        left = unprocessed(len(sent))
        return {"UnprocessedItems": call.params["RequestItems"] if left else {}}

    return answer


def test_unprocessed_deletes_are_sent_again_until_done() -> None:
    prefix, calls = new_prefix(), []

    def unprocessed(n: int) -> bool:
        calls.append(n)
        return n < 3

    assert remove_namespaces(_store(prefix, unprocessed), "t", "here", prefix) == 1
    assert calls == [1, 2, 3]


def test_unprocessed_deletes_fail_after_a_bound() -> None:
    prefix = new_prefix()
    with pytest.raises(LedgerUnavailable, match="still unprocessed after 8 attempts"):
        remove_namespaces(_store(prefix, lambda n: True), "t", "here", prefix)
