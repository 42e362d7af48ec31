"""Malformed answers fail closed, through the shipped ledger on a scripted client (no
server needed)."""

from __future__ import annotations

from typing import Any

import pytest

from ledger_core.errors import LedgerUnavailable
from ledger_dynamodb import items
from tests.dynamodb import tools


def _ledger(malformed: str) -> Any:
    """A ledger answered as a store would, except ``malformed``'s answer: a list."""

    def answer(call: tools.Call) -> Any:
        params = call.params
        if call.op == "get_item" and "ProjectionExpression" in params:
            op = "is_spent"
        elif call.op == "get_item":
            op = "genesis"
        else:
            op = call.op
        if op == malformed:
            return ["not", "a", "map"]
        if op == "genesis":
            return {"Item": {items.GENESIS: {"B": tools.GENESIS}}}
        if op == "scan":
            return {"Items": []}
        return {}

    return tools.offline_ledger(answer)


@pytest.mark.parametrize("malformed", ["is_spent", "genesis"])
def test_an_is_spent_answer_that_is_no_map_is_unavailable(malformed: str) -> None:
    """Read as ``{}`` it was an absent record: ``is_spent`` answered False (or, for the
    genesis, failed the ledger for good as if the store forgot)."""
    ledger = _ledger(malformed)
    with pytest.raises(LedgerUnavailable, match="not a map"):
        ledger.is_spent("id")
    assert ledger._guard.failed is None
    assert _ledger("nothing").is_spent("id") is False  # the script answers well otherwise


@pytest.mark.parametrize("malformed", ["scan", "genesis"])
def test_a_scan_page_that_is_no_map_is_unavailable(malformed: str) -> None:
    with pytest.raises(LedgerUnavailable, match="not a map"):
        list(_ledger(malformed).spent_ids())
    assert list(_ledger("nothing").spent_ids()) == []
