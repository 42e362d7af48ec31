"""C10 on Redis: ``spend_as`` in the spend's own script (one round trip), the attempt's
digest stored with the C5 token, standalone and Cluster, sync and async."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import redis

from ledger_conformance.faults import FaultProxy
from ledger_core import open_async_ledger, open_ledger
from ledger_core.errors import InvalidRequestId
from ledger_core.reentry import attempt_digest
from ledger_core.tokens import TOKEN_BYTES
from ledger_redis import commands
from tests.flavors import Flavored
from tests.servers import redis as servers

from .held import Held

KEY = "attempt-key-one-0123456789"
OTHER = "attempt-key-two-0123456789"


@pytest.fixture(params=["plain", "cluster"])
def url(request: pytest.FixtureRequest) -> str:
    value: str = request.getfixturevalue("redis_url" if request.param == "plain" else "cluster_url")
    return value


@pytest.fixture(params=["sync", "async"])
def ledger(request: pytest.FixtureRequest, url: str, namespace: str) -> Iterator[Flavored]:
    with Flavored(request.param, url, namespace=namespace) as opened:
        yield opened


def _spend_as(ledger: Flavored, request_id: str, key: str) -> bool:
    result: bool = ledger.run(ledger.ledger.spend_as(request_id, key))
    return result


def test_the_same_key_re_enters_and_no_other(ledger: Flavored) -> None:
    assert _spend_as(ledger, "r1", KEY) is True
    assert _spend_as(ledger, "r1", KEY) is True  # the same attempt, retried
    assert _spend_as(ledger, "r1", OTHER) is False
    assert ledger.spend("r1") is False  # a plain spend never re-enters
    assert ledger.is_spent("r1") is True
    assert _spend_as(ledger, "r1", KEY) is True  # still the winner's


def test_a_plain_spend_is_no_attempt(ledger: Flavored) -> None:
    assert ledger.spend("plain") is True
    assert _spend_as(ledger, "plain", KEY) is False
    assert _spend_as(ledger, "plain", OTHER) is False


def test_bad_keys_are_refused_before_any_io(ledger: Flavored) -> None:
    for key in ("short", "x" * 257, "caf\u00e9-attempt-key-123456", 42):
        with pytest.raises(InvalidRequestId):
            _spend_as(ledger, "bad-key", key)  # type: ignore[arg-type]
    assert ledger.is_spent("bad-key") is False


def test_the_store_holds_the_digest_never_the_key(url: str, namespace: str) -> None:
    cluster = url.startswith("redis+cluster://")
    with Flavored("sync", url, namespace=namespace) as ledger:
        assert _spend_as(ledger, "stored", KEY) is True
        assert ledger.spend("plain-stored") is True
    keys = commands.Keys(namespace, cluster)
    client: Any = (
        redis.cluster.RedisCluster.from_url("redis://" + url.split("://", 1)[1])
        if cluster
        else redis.Redis.from_url(url)
    )
    try:
        value = client.get(keys.record(b"stored"))
        plain = client.get(keys.record(b"plain-stored"))
    finally:
        client.close()
    assert len(value) == TOKEN_BYTES + 32
    assert value[TOKEN_BYTES:] == attempt_digest(KEY)
    assert KEY.encode() not in value
    assert len(plain) == TOKEN_BYTES  # an old-style record: a token, no digest


def test_threads_with_distinct_keys_one_winner(url: str, namespace: str) -> None:
    ledger: Any = open_ledger(url, namespace=namespace)
    workers = 16
    barrier = threading.Barrier(workers, timeout=30)

    def race(worker: int) -> list[bool]:
        key = f"attempt-key-worker-{worker:04d}"
        won = []
        for round_ in range(10):
            barrier.wait()
            won.append(ledger.spend_as(f"race-{round_}", key))
        return won

    try:
        with ThreadPoolExecutor(workers) as pool:
            outcomes = list(pool.map(race, range(workers)))
        for round_ in range(10):
            winners = [w for w in range(workers) if outcomes[w][round_]]
            assert len(winners) == 1
            # Only the winner re-enters.
            key = f"attempt-key-worker-{winners[0]:04d}"
            assert ledger.spend_as(f"race-{round_}", key) is True
            loser = (winners[0] + 1) % workers
            assert ledger.spend_as(f"race-{round_}", f"attempt-key-worker-{loser:04d}") is False
    finally:
        ledger.close()


def test_tasks_with_distinct_keys_one_winner(url: str, namespace: str) -> None:
    """64 tasks on two ledgers, each with its own key, released together per round."""

    async def round_of(ledgers: list[Any], request_id: str) -> list[bool]:
        go = asyncio.Event()

        async def attempt(i: int) -> bool:
            await go.wait()
            won: bool = await ledgers[i % 2].spend_as(request_id, f"attempt-key-task-{i:04d}")
            return won

        tasks = [asyncio.ensure_future(attempt(i)) for i in range(64)]
        await asyncio.sleep(0)  # every task waits on the event
        go.set()
        return list(await asyncio.gather(*tasks))

    async def main() -> list[list[bool]]:
        ledgers: list[Any] = [await open_async_ledger(url, namespace=namespace) for _ in "ab"]
        try:
            return [await round_of(ledgers, f"task-{r}") for r in range(5)]
        finally:
            await asyncio.gather(*(ledger.aclose() for ledger in ledgers))

    for results in asyncio.run(main()):
        assert results.count(True) == 1


@pytest.fixture
def proxy(local_plain: servers.RedisServer) -> Iterator[FaultProxy]:
    with FaultProxy("127.0.0.1", local_plain.port) as fault:
        yield fault


@pytest.mark.parametrize("flavor", ["sync", "async"])
def test_a_lost_reply_is_resolved_by_the_retry(
    flavor: str, proxy: FaultProxy, local_plain: servers.RedisServer, namespace: str
) -> None:
    with Held(flavor, proxy, namespace) as ledger:
        won = ledger.lose_one_reply(lambda: _spend_as(ledger, "lost-as", KEY))
        assert won is True  # the retry found our token and digest
        assert _spend_as(ledger, "lost-as", KEY) is True
        assert _spend_as(ledger, "lost-as", OTHER) is False
        with Flavored(flavor, local_plain.url, namespace=namespace) as direct:
            assert _spend_as(direct, "theirs-as", OTHER) is True
        # Our reply lost, the retry finds another attempt's record: refused.
        assert ledger.lose_one_reply(lambda: _spend_as(ledger, "theirs-as", KEY)) is False


def _sets(client: redis.Redis) -> int:
    """How many SETs the server ran (the scripts' own included)."""
    stats: dict[str, Any] = client.info("commandstats")
    return int(stats.get("cmdstat_set", {}).get("calls", 0))


@pytest.mark.parametrize("flavor", ["sync", "async"])
def test_a_re_entry_is_vouched_by_wait(
    flavor: str,
    primary_and_replica: tuple[servers.RedisServer, servers.RedisServer],
    namespace: str,
) -> None:
    """With ``wait_replicas``, the WAIT in a re-entry's trip must cover the record it
    re-enters, which an earlier call (maybe another connection) wrote: the script writes
    it again, unchanged, so the WAIT counts a write that follows it."""
    primary, _ = primary_and_replica
    client = redis.Redis(port=primary.port)
    try:
        with Flavored(flavor, primary.url, namespace=namespace, wait_replicas="1") as ledger:
            assert _spend_as(ledger, "waited", KEY) is True
            before = _sets(client)
            assert _spend_as(ledger, "waited", KEY) is True
            assert _sets(client) == before + 1  # written again: the WAIT covers it
            assert _spend_as(ledger, "waited", OTHER) is False
            assert ledger.spend("waited") is False
            assert _sets(client) == before + 1  # a refused attempt writes nothing
            value = client.get(commands.Keys(namespace).record(b"waited"))
            assert value is not None
            assert value[TOKEN_BYTES:] == attempt_digest(KEY)
    finally:
        client.close()
