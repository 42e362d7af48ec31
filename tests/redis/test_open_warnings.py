"""No warning from opening a Redis ledger, sync or async (standalone; the Sentinel
pool takes the same Retry: tests/redis/test_sentinel_auth.py)."""

from __future__ import annotations

from tests.quiet_open import NONE, warnings_on_open


def test_opening_warns_of_nothing(redis_url: str) -> None:
    assert warnings_on_open(redis_url, namespace="quiet-open") == NONE
