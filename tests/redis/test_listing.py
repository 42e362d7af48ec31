"""Redis as a migration source: ``spent_ids`` lists exactly this namespace's ids."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis

from ledger_core import migrate, open_ledger
from ledger_core.errors import LedgerUnavailable, UnsafeStoreConfig
from ledger_core.ids import marker_id
from ledger_redis import commands
from ledger_redis.ledger import page
from ledger_redis.scans import Listing
from ledger_sqlite import SQLiteLedger
from tests.flavors import Flavored

# Ids and namespaces a naive SCAN MATCH would glob, split or mis-decode.
IDS = ["*", "a?b", "[ab]", "\\", "{tag}x", "nul\x00:colon", "é", "x" * 1024, "1:a:b"]


@pytest.fixture(params=["plain", "cluster"])
def url(request: pytest.FixtureRequest) -> str:
    value: str = request.getfixturevalue("redis_url" if request.param == "plain" else "cluster_url")
    return value


@pytest.fixture(params=["sync", "async"])
def flavor(request: pytest.FixtureRequest) -> str:
    value: str = request.param
    return value


@pytest.fixture
def glob_namespace(namespace: str) -> str:
    return namespace + "-*?[a]\\"


def test_lists_every_id_once_and_nothing_else(url: str, flavor: str, glob_namespace: str) -> None:
    ids = IDS + [f"id-{i}" for i in range(2100)]
    with Flavored(flavor, url, namespace=glob_namespace) as ledger:
        for request_id in ids:
            assert ledger.spend(request_id) is True
        ledger.run(ledger.ledger.spend_marker(marker_id("migrated-from", "x")))
        # Neighbours the pattern must not match: a prefix namespace, a glob-equal one.
        with Flavored("sync", url, namespace=glob_namespace[:-1]) as near:
            near.spend("neighbour")
        with Flavored("sync", url, namespace=glob_namespace.replace("*", "Z")) as near:
            near.spend("neighbour2")
        listed = ledger.spent_ids(count=100)
    assert sorted(listed) == sorted(ids)
    assert len(listed) == len(ids)


def test_empty_namespace_lists_nothing(url: str, flavor: str, namespace: str) -> None:
    with Flavored(flavor, url, namespace=namespace) as ledger:
        assert ledger.spent_ids() == []


def test_a_forgotten_store_refuses_to_list(redis_url: str, namespace: str) -> None:
    ledger: Any = open_ledger(redis_url, namespace=namespace)
    try:
        ledger.spend("a")
        client = redis.Redis.from_url(redis_url)
        client.delete(ledger._keys.genesis)  # the store forgot (an eviction)
        with pytest.raises(UnsafeStoreConfig, match="forgot"):
            list(ledger.spent_ids())
        with pytest.raises(UnsafeStoreConfig):  # failed closed for good
            ledger.spend("b")
    finally:
        ledger.close()


def test_a_foreign_non_utf8_record_is_refused(redis_url: str, namespace: str) -> None:
    ledger: Any = open_ledger(redis_url, namespace=namespace)
    try:
        redis.Redis.from_url(redis_url).set(ledger._keys.record(b"\xc3("), b"x")
        with pytest.raises(UnsafeStoreConfig, match="UTF-8"):
            list(ledger.spent_ids())
    finally:
        ledger.close()


@pytest.fixture
def redis_source(url: str, namespace: str) -> Iterator[Any]:
    ledger: Any = open_ledger(url, namespace=namespace)
    yield ledger
    ledger.close()


def test_redis_migrates_to_sqlite(redis_source: Any, tmp_path: object) -> None:
    for request_id in IDS:
        redis_source.spend(request_id)
    target = SQLiteLedger(f"{tmp_path}/new.db")
    report = migrate(redis_source, target)
    assert report.verified == len(IDS)
    assert sorted(target.spent_ids()) == sorted(IDS)


def test_a_key_scan_returns_twice_is_listed_once() -> None:
    """SCAN may repeat a key (a rehash mid-scan): the listing still gives it once."""
    keys = commands.Keys("ns")
    plan = commands.Plan(keys=keys, genesis=b"0" * 32)
    listing = Listing(plan, 10)
    pages = [
        (1, 7, [keys.record(b"a"), keys.record(b"\xffm\x00x")]),
        (1, 0, [keys.record(b"a"), keys.record(b"b")]),
    ]
    asked: list[tuple[Any, int]] = []

    class Pages:
        """A standalone link's page: one trip, the proof in it."""

        def primaries(self, what: str, deadline: Any) -> list[Any]:
            return [None]

        def scan(self, node: Any, command: Any, proof: Any, what: str, deadline: Any) -> Any:
            asked.append((node, command[1]))
            assert proof == plan.proof_command  # proved in the same trip
            return pages.pop(0)

    got = [page(Pages(), listing, None) for _ in range(3)]  # type: ignore[arg-type]
    assert got == [(["a"], listing), (["b"], listing), ([], None)]
    assert asked == [(None, 0), (None, 7)]
    with pytest.raises(LedgerUnavailable, match="foreign"):
        listing.take(1, 0, [commands.Keys("other").record(b"a")])


def test_spend_many_answers_per_id(url: str, flavor: str, namespace: str) -> None:
    with Flavored(flavor, url, namespace=namespace) as ledger:
        assert ledger.spend("b") is True
        ids = ["a", "b", "a", "*", *[f"i{n}" for n in range(1100)]]
        answers = ledger.run(ledger.ledger.spend_many(ids))
        assert answers[:4] == [True, False, False, True]
        assert all(answers[4:])
        assert ledger.run(ledger.ledger.spend_many(["a", "new"])) == [False, True]
        assert sorted(ledger.spent_ids()) == sorted({*ids, "new"})


def test_spend_many_proves_the_genesis(redis_url: str, namespace: str) -> None:
    ledger: Any = open_ledger(redis_url, namespace=namespace)
    try:
        redis.Redis.from_url(redis_url).delete(ledger._keys.genesis)
        with pytest.raises(UnsafeStoreConfig, match="forgot"):
            ledger.spend_many(["x", "y"])
        assert redis.Redis.from_url(redis_url).exists(ledger._keys.record(b"x")) == 0
    finally:
        ledger.close()


# is_spent_many: the read script of each id, pipelined (a bulk read was one trip per id).
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
        redis.Redis.from_url(redis_url).delete(ledger._keys.genesis)
        with pytest.raises(UnsafeStoreConfig, match="forgot"):
            ledger.is_spent_many(["x", "y"])
    finally:
        ledger.close()
