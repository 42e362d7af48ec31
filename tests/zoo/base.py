"""A small, correct ledger over redis-server that every mutant in the zoo bends.

It is tiny on purpose: one string key per (store, id), hex-encoded so no encoding can
collide; ``SET NX`` with a fresh token per spend; after a failure, the token read back
decides (C5); every failure raised as a ``LedgerError``. Its identity is a genesis key
written by the first opener, and every spend and read proves, in the same script, that
the genesis is still the one it opened (a store that forgot fails closed, C6). Its async
face runs the sync ledger on worker threads. The redis address comes from
``LEDGER_ZOO_REDIS`` (``host:port``), routed through ``ctx.route`` so the suite's fault
proxy is in the path.
"""

from __future__ import annotations

import asyncio
import os
import threading
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from ledger_conformance import LedgerContext
from ledger_core.errors import AmbiguousSpend, LedgerError, LedgerUnavailable, UnsafeStoreConfig
from ledger_core.ids import validate_request_id

ENV = "LEDGER_ZOO_REDIS"
TIMEOUT = 1.0
CALL_DEADLINE = 3 * TIMEOUT  # a script's whole round trip, however its reply trickles
FORGOT = -1  # what a guarded script answers when the genesis is gone or another one
# Each script first proves the store is the one this ledger opened (KEYS[1] = genesis key).
GUARD = "if redis.call('GET', KEYS[1]) ~= ARGV[1] then return -1 end\n"
GUARDED_SET = GUARD + "if redis.call('SET', KEYS[2], ARGV[2], 'NX') then return 1 end\nreturn 0"
GUARDED_GET = GUARD + "return redis.call('GET', KEYS[2])"
GUARDED_EXISTS = GUARD + "return redis.call('EXISTS', KEYS[2])"


def redis_address() -> tuple[str, int]:
    value = os.environ.get(ENV)
    if not value:
        raise LedgerUnavailable(f"{ENV} is not set (host:port of the zoo's redis-server)")
    host, _, port = value.rpartition(":")
    return host, int(port)


class ZooLedger:
    """Correct: passes every clause. Mutants override one hook each."""

    routed = True  # build() says whether ctx.route put the fault proxy in the path

    def __init__(self, label: str, host: str, port: int) -> None:
        self.label = label
        self.client = redis.Redis(
            host=host,
            port=port,
            socket_timeout=TIMEOUT,
            socket_connect_timeout=TIMEOUT,
            retry=Retry(NoBackoff(), 0),  # a retried SET NX would lose its own write (C5)
        )
        self.genesis_key = f"zoo-id:{self.label.encode().hex()}"
        try:
            self.client.set(self.genesis_key, uuid.uuid4().hex, nx=True)
            value = self.client.get(self.genesis_key)
            self.genesis = value if isinstance(value, bytes) else b""
            self.store_id: str | None = self.identity()
        except redis.RedisError as exc:
            self.client.close()
            raise LedgerUnavailable(f"zoo redis unreachable: {exc}") from exc

    # -- hooks the mutants override ----------------------------------------------------
    def identity(self) -> str | None:
        return f"zoo:{self.genesis!s}"

    def guarded(self, script: str, key: str, *args: str) -> Any:
        """Run ``script`` on ``key`` only if the store still holds this ledger's genesis."""
        result = self.run_script(script, [self.genesis_key, key], [self.genesis, *args])
        if result == FORGOT:
            raise UnsafeStoreConfig(
                "the store forgot: its identity changed since this ledger opened; reopen"
            )
        return result

    def bound(self, call: Callable[[], Any]) -> Any:
        """``bounded(call)`` when a fault proxy sits in the path (it can trickle a reply);
        a direct call otherwise: a thread per call cost the suite more than the call."""
        return bounded(call) if self.routed else call()

    def run_script(self, script: str, keys: list[str], args: list[Any]) -> Any:
        return self.bound(lambda: self.client.eval(script, len(keys), *keys, *args))

    def key(self, request_id: str) -> str:
        return f"zoo:{self.label.encode().hex()}:{validate_request_id(request_id).hex()}"

    def write(self, key: str, token: str) -> bool:
        return bool(self.guarded(GUARDED_SET, key, token))

    def on_spend_failure(self, key: str, token: str, failure: Exception) -> bool:
        return bool(self.read_back(key, failure) == token.encode())

    def read_back(self, key: str, failure: Exception) -> bytes:
        """C5: the value stored under ``key`` after a failed write, or a raise when that
        cannot be known (ambiguous) or nothing landed."""
        try:
            stored = self.guarded(GUARDED_GET, key)
        except redis.RedisError as exc:
            raise AmbiguousSpend(f"spend failed ({failure}); outcome unknown ({exc})") from exc
        if stored is None:
            raise LedgerUnavailable(f"spend did not land: {failure}") from failure
        return bytes(stored)

    def read(self, key: str) -> bool:
        try:
            return bool(self.guarded(GUARDED_EXISTS, key))
        except redis.RedisError as exc:
            raise LedgerUnavailable(f"is_spent failed: {exc}") from exc

    # -- the protocol ------------------------------------------------------------------
    def spend(self, request_id: str) -> Any:
        return self.spend_key(self.key(request_id))

    def spend_key(self, key: str) -> Any:
        """Record ``key`` with a fresh token; after a failure, the token read back (C5)."""
        token = uuid.uuid4().hex
        try:
            return self.write(key, token)
        except redis.RedisError as exc:
            return self.on_spend_failure(key, token, exc)

    def is_spent(self, request_id: str) -> Any:
        return self.read(self.key(request_id))

    def listing_pattern(self) -> str:
        return f"zoo:{self.label.encode().hex()}:*"

    def spent_ids(self) -> Any:
        """L1: this store's records (hex ids: no glob byte, no marker ever stored)."""
        try:
            for key in self.client.scan_iter(match=self.listing_pattern(), count=500):
                yield bytes.fromhex(key.decode().rpartition(":")[2]).decode("utf-8")
        except redis.RedisError as exc:
            raise LedgerUnavailable(f"spent_ids failed: {exc}") from exc

    def close(self) -> None:
        self.client.close()


def bounded(call: Callable[[], Any], seconds: float = CALL_DEADLINE) -> Any:
    """``call()`` on a thread of its own, given ``seconds`` in all: redis-py's socket
    timeout bounds each read, not a call, and a reply sent a byte at a time never trips
    it. Past the deadline the call is abandoned (its connection with it) and this raises
    ``redis.TimeoutError``, which a spend resolves like any other failure (C5)."""
    box: list[tuple[bool, Any]] = []

    def run() -> None:
        try:
            box.append((True, call()))
        except BaseException as exc:  # handed to the caller below
            box.append((False, exc))

    thread = threading.Thread(target=run, name="zoo-call", daemon=True)
    thread.start()
    thread.join(seconds)
    if not box:
        raise redis.TimeoutError(f"no reply within {seconds:g} s")
    done, value = box[0]
    if done:
        return value
    raise value


class AsyncZooLedger:
    """The async face: the same ledger, run on its own worker threads."""

    def __init__(self, sync: Any) -> None:
        self.sync = sync
        self.store_id = sync.store_id
        self._pool = ThreadPoolExecutor(16, thread_name_prefix="zoo")

    async def spend(self, request_id: str) -> Any:
        return await asyncio.get_running_loop().run_in_executor(
            self._pool, self.sync.spend, request_id
        )

    async def is_spent(self, request_id: str) -> Any:
        return await asyncio.get_running_loop().run_in_executor(
            self._pool, self.sync.is_spent, request_id
        )

    async def aclose(self) -> None:
        self._pool.shutdown(wait=False)
        self.sync.close()


class AsyncReentrantZooLedger(AsyncZooLedger):
    """The async face of a zoo ledger with ``spend_as`` (C10)."""

    async def spend_as(self, request_id: str, attempt_key: str) -> Any:
        return await asyncio.get_running_loop().run_in_executor(
            self._pool, self.sync.spend_as, request_id, attempt_key
        )


def build(
    cls: type[Any], ctx: LedgerContext, address: tuple[str, int] | None = None, **kwargs: Any
) -> Any:
    """Open ``cls`` on the zoo's redis (or ``address``) for ``ctx``, sync or async."""
    upstream = address or redis_address()
    host, port = ctx.route(*upstream)
    sync = cls(ctx.store, host, port, **kwargs)
    sync.routed = (host, port) != upstream
    if ctx.flavor != "async":
        return sync
    return AsyncReentrantZooLedger(sync) if hasattr(sync, "spend_as") else AsyncZooLedger(sync)


def factory_of(cls: type[Any]) -> Any:
    """The factory (named like ``cls``) that builds ``cls`` for each context."""

    def factory(ctx: LedgerContext) -> Any:
        return build(cls, ctx)

    factory.__name__ = factory.__qualname__ = cls.__name__
    return factory


def correct(ctx: LedgerContext) -> Any:
    """The control: the zoo's base ledger, unbent."""
    return build(ZooLedger, ctx)


def flush(address: tuple[str, int]) -> None:
    """The store forgets everything: FLUSHALL on the redis-server at ``address``."""
    client = redis.Redis(host=address[0], port=address[1], socket_timeout=10.0)
    try:
        client.flushall()
    finally:
        client.close()


def flush_namespace(address: tuple[str, int], label: str) -> None:
    """One store forgets: every key of the store ``label`` (records and genesis), no other."""
    client = redis.Redis(host=address[0], port=address[1], socket_timeout=10.0)
    hexed = label.encode().hex()
    try:
        keys = [*client.scan_iter(match=f"zoo:{hexed}:*", count=1000), f"zoo-id:{hexed}"]
        client.delete(*keys)
    finally:
        client.close()


def forget() -> None:
    """The forget hook for ledgers on ``LEDGER_ZOO_REDIS`` (by hand only: it flushes every
    run sharing that server; the meta-test gives forget runs a server of their own)."""
    flush(redis_address())


__all__ = [
    "AsyncReentrantZooLedger",
    "AsyncZooLedger",
    "LedgerError",
    "ZooLedger",
    "bounded",
    "build",
    "correct",
    "factory_of",
    "flush",
    "flush_namespace",
    "forget",
]
