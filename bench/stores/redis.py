"""Redis: the ledger (one Lua script per call, proving the genesis) against ``SET NX``.

The server is the tests' proving configuration (AOF, ``appendfsync always``): what a
ledger that claims a ``store_id`` runs on. Raw calls share the ledger's client (sync) and
async client; the peer is cachelib's ``RedisCache.add`` (no expiry) on the same client.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack, asynccontextmanager, contextmanager
from typing import Any

import redis
import redis.asyncio

from bench.measure import PEER, AsyncContender, Contender, async_pair, ops, pair
from bench.stores import Subject, chunks, optional, split_url, versions
from ledger_redis import AsyncRedisLedger, RedisLedger
from tests.servers import redis as servers

NAME = "redis"
SCHEMES = ("redis", "rediss", "unix")

UNAVAILABLE = servers.ServerUnavailable
RAW_CALLS = "SET NX / EXISTS"
LEDGER_OPTIONS = frozenset({"namespace", "create", "durability", "recheck_interval", "timeout"})
TOKEN = os.urandom(16)


def _by_hand(driver_url: str, ledger: Any, stack: ExitStack) -> Contender:
    """The ledger's own scripts (the same guarantee), called by hand with redis-py's
    ``evalsha`` on a plain client of the host's own: what the ledger's code costs."""
    own = redis.Redis.from_url(driver_url)
    stack.callback(own.close)
    head = (2, ledger._genesis_key)
    prefix, proof = ledger._record_prefix, ledger._proof

    def spend(rid: str) -> object:
        return own.evalsha(ledger._spend_sha, *head, prefix + rid.encode(), proof, TOKEN)

    def is_spent(rid: str) -> object:
        return own.evalsha(ledger._read_sha, *head, prefix + rid.encode(), proof)

    return Contender("its script by hand", PEER, ops(spend, is_spent))


@contextmanager
def server() -> Iterator[str]:
    with servers.redis_url(servers.PLAIN) as url:
        yield url


def subject(url: str, stack: ExitStack) -> Subject:
    driver_url, options = split_url(url, LEDGER_OPTIONS)
    client = redis.Redis.from_url(driver_url)
    stack.callback(client.close)
    ledger = RedisLedger.from_client(client, **options)
    stack.callback(ledger.close)

    def raw_spend(rid: str) -> object:
        return client.set(b"raw:" + rid.encode(), TOKEN, nx=True)

    def raw_is_spent(rid: str) -> object:
        return client.exists(b"raw:" + rid.encode())

    contenders = pair(ledger, RAW_CALLS, raw_spend, raw_is_spent)
    contenders.append(_by_hand(driver_url, ledger, stack))
    cachelib = optional("cachelib.redis")
    if cachelib is not None:
        cache = cachelib.RedisCache(host=client, key_prefix="cachelib:", default_timeout=0)

        def add(rid: str) -> object:
            return cache.add(rid, TOKEN)

        contenders.append(Contender("cachelib add / has", PEER, ops(add, cache.has)))

    def preload(numbers: range) -> None:
        for part in chunks(len(numbers), 10_000):
            pipe = client.pipeline(transaction=False)
            for i in part:
                pipe.set(f"pre:{numbers[i]}".encode(), TOKEN)
            pipe.execute()

    @asynccontextmanager
    async def open_async() -> AsyncIterator[list[AsyncContender]]:
        aclient = redis.asyncio.Redis.from_url(driver_url)
        aledger = await AsyncRedisLedger.from_client(aclient, **options)

        async def araw_spend(rid: str) -> object:
            return await aclient.set(b"raw:" + rid.encode(), TOKEN, nx=True)

        async def araw_is_spent(rid: str) -> object:
            return await aclient.exists(b"raw:" + rid.encode())

        try:
            yield async_pair(aledger, RAW_CALLS, araw_spend, araw_is_spent)
        finally:
            await aledger.aclose()
            await aclient.aclose()

    info: Any = client.info("server")
    persistence: Any = client.config_get("appendfsync")
    return Subject(
        NAME,
        f"redis-server {info.get('redis_version')} (appendfsync "
        f"{persistence.get('appendfsync', '?')})",
        contenders,
        preload,
        open_async,
        versions("redis", "cachelib"),
    )
