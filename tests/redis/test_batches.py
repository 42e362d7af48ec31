"""``is_spent_many`` on Redis: the read script of each id, pipelined, each id answered on
its own and the genesis proven in the same trip (it had only ``spend_many`` before: a
bulk read was one round trip per id)."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from ledger_core import open_ledger
from ledger_core.errors import UnsafeStoreConfig
from tests.flavors import Flavored


@pytest.fixture(params=["plain", "cluster"])
def url(request: pytest.FixtureRequest) -> str:
    value: str = request.getfixturevalue("redis_url" if request.param == "plain" else "cluster_url")
    return value


@pytest.fixture(params=["sync", "async"])
def flavor(request: pytest.FixtureRequest) -> str:
    value: str = request.param
    return value


def test_is_spent_many_answers_per_id(url: str, flavor: str, namespace: str) -> None:
    spent = ["a", "*", *[f"i{n}" for n in range(0, 1100, 2)]]
    asked = ["a", "never", "a", "*", *[f"i{n}" for n in range(1100)]]
    with Flavored(flavor, url, namespace=namespace) as ledger:
        assert ledger.run(ledger.ledger.spend_many(spent)) == [True] * len(spent)
        answers = ledger.run(ledger.ledger.is_spent_many(asked))
        assert answers == [request_id in spent for request_id in asked]
        assert ledger.run(ledger.ledger.is_spent_many([])) == []


def test_is_spent_many_proves_the_genesis(redis_url: str, namespace: str) -> None:
    ledger: Any = open_ledger(redis_url, namespace=namespace)
    try:
        ledger.spend("x")
        redis.Redis.from_url(redis_url).delete(ledger._session.plan.keys.genesis)
        with pytest.raises(UnsafeStoreConfig, match="forgot"):
            ledger.is_spent_many(["x", "y"])
    finally:
        ledger.close()
