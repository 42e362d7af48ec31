"""No warning from opening a DynamoDB ledger, sync or async."""

from __future__ import annotations

from tests.quiet_open import NONE, warnings_on_open


def test_opening_warns_of_nothing(dynamodb_url: str, namespace: str) -> None:
    assert warnings_on_open(dynamodb_url, namespace=namespace) == NONE
