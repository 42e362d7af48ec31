"""A small, correct ledger over redis-server that every mutant in the zoo bends.

It is tiny on purpose: one string key per (store, id), hex-encoded so no encoding can
collide; ``SET NX`` with a fresh token per spend; after a failure, the token read back
decides (C5); every failure raised as a ``LedgerError``. Its async face runs the sync
ledger on worker threads. The redis address comes from ``LEDGER_ZOO_REDIS``
(``host:port``), routed through ``ctx.route`` so the suite's fault proxy is in the path.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import redis
from ledger_conformance import LedgerContext
from redis.backoff import NoBackoff
from redis.retry import Retry

from ledger_core.errors import AmbiguousSpend, LedgerError, LedgerUnavailable
from ledger_core.ids import validate_request_id

ENV = "LEDGER_ZOO_REDIS"
TIMEOUT = 1.0


def redis_address() -> tuple[str, int]:
    value = os.environ.get(ENV)
    if not value:
        raise LedgerUnavailable(f"{ENV} is not set (host:port of the zoo's redis-server)")
    host, _, port = value.rpartition(":")
    return host, int(port)


class ZooLedger:
    """Correct: passes every clause. Mutants override one hook each."""

    def __init__(self, label: str, host: str, port: int) -> None:
        self.label = label
        self.client = redis.Redis(
            host=host,
            port=port,
            socket_timeout=TIMEOUT,
            socket_connect_timeout=TIMEOUT,
            retry=Retry(NoBackoff(), 0),  # a retried SET NX would lose its own write (C5)
        )
        try:
            self.store_id: str | None = self.identity()
        except redis.RedisError as exc:
            self.client.close()
            raise LedgerUnavailable(f"zoo redis unreachable: {exc}") from exc

    # -- hooks the mutants override ----------------------------------------------------
    def identity(self) -> str | None:
        key = f"zoo-id:{self.label.encode().hex()}"
        self.client.set(key, uuid.uuid4().hex, nx=True)
        value = self.client.get(key)
        return f"zoo:{value!s}"

    def key(self, request_id: str) -> str:
        return f"zoo:{self.label.encode().hex()}:{validate_request_id(request_id).hex()}"

    def write(self, key: str, token: str) -> bool:
        return bool(self.client.set(key, token, nx=True))

    def on_spend_failure(self, key: str, token: str, failure: Exception) -> bool:
        try:
            stored = self.client.get(key)
        except redis.RedisError as exc:
            raise AmbiguousSpend(f"spend failed ({failure}); outcome unknown ({exc})") from exc
        if stored is None:
            raise LedgerUnavailable(f"spend did not land: {failure}") from failure
        return bool(stored == token.encode())

    def read(self, key: str) -> bool:
        try:
            return bool(self.client.exists(key))
        except redis.RedisError as exc:
            raise LedgerUnavailable(f"is_spent failed: {exc}") from exc

    # -- the protocol ------------------------------------------------------------------
    def spend(self, request_id: str) -> Any:
        key = self.key(request_id)
        token = uuid.uuid4().hex
        try:
            return self.write(key, token)
        except redis.RedisError as exc:
            return self.on_spend_failure(key, token, exc)

    def is_spent(self, request_id: str) -> Any:
        return self.read(self.key(request_id))

    def close(self) -> None:
        self.client.close()


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


def build(
    cls: type[Any], ctx: LedgerContext, address: tuple[str, int] | None = None, **kwargs: Any
) -> Any:
    """Open ``cls`` on the zoo's redis (or ``address``) for ``ctx``, sync or async."""
    host, port = ctx.route(*(address or redis_address()))
    sync = cls(ctx.store, host, port, **kwargs)
    return AsyncZooLedger(sync) if ctx.flavor == "async" else sync


def correct(ctx: LedgerContext) -> Any:
    """The control: the zoo's base ledger, unbent."""
    return build(ZooLedger, ctx)


__all__ = ["AsyncZooLedger", "LedgerError", "ZooLedger", "build", "correct"]
