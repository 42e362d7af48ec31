"""Malformed answers fail closed, driven through the shipped decisions with scripted
answers (no server needed)."""

from __future__ import annotations

from typing import Any

import pytest

from ledger_core.errors import LedgerUnavailable
from ledger_core.guard import Guard
from ledger_core.steps import Steps, run_steps
from ledger_dynamodb import commands, decisions, identity
from ledger_dynamodb.commands import Call, Request
from ledger_dynamodb.options import Settings

GENESIS = b"g" * identity.GENESIS_BYTES


def _session() -> decisions.Session:
    session = decisions.Session("ledger", Settings(), "dynamodb://ledger", None)
    session.genesis, session.guard = GENESIS, Guard(60.0)
    return session


def _run(steps: Steps[Request, Any], malformed: str) -> Any:
    """Answers ``steps`` as a store would, except ``malformed``'s answer: a list."""

    def perform(request: Request) -> Any:
        assert isinstance(request, Call)
        params = request.params
        if request.op == "get_item" and "ProjectionExpression" in params:
            op = "is_spent"
        elif request.op == "get_item":
            op = "genesis"
        else:
            op = request.op
        if op == malformed:
            return ["not", "a", "map"]
        if op == "genesis":
            return {"Item": {commands.GENESIS: {"B": GENESIS}}}
        if op == "scan":
            return {"Items": []}
        return {}

    return run_steps(steps, perform)


@pytest.mark.parametrize("malformed", ["is_spent", "genesis"])
def test_an_is_spent_answer_that_is_no_map_is_unavailable(malformed: str) -> None:
    """Read as ``{}`` it was an absent record: ``is_spent`` answered False (or, for the
    genesis, failed the ledger for good as if the store forgot)."""
    session = _session()
    with pytest.raises(LedgerUnavailable, match="not a map"):
        _run(decisions.is_spent_steps(session, b"id"), malformed)
    assert session.guard.failed is None


@pytest.mark.parametrize("malformed", ["scan", "genesis"])
def test_a_scan_page_that_is_no_map_is_unavailable(malformed: str) -> None:
    scan = decisions.ParallelScan.ids(_session())
    page = scan.next_pages()[0]
    with pytest.raises(LedgerUnavailable, match="not a map"):
        _run(page, malformed)
