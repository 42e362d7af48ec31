"""Mutants that C6's forget forms catch, each one form only: an identity trusted on a
timer (the immediate forget), one genesis for the whole server (one namespace), and an
identity proven in a round trip of its own before the write (a forget while the write is
in flight). Each runs on this process's own redis-server (``restartable``), whose forget
hook flushes it or, told a namespace, deletes that namespace's keys.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import redis

from ledger_conformance import LedgerContext
from ledger_core.errors import LedgerUnavailable, UnsafeStoreConfig

from . import restartable
from .base import ZooLedger

WINDOW = 0.25  # seconds a checked identity is trusted (like a periodic re-check)
SLOW_FORGET = 0.5  # what a subprocess forget costs at least: longer than WINDOW


class ChecksThenWrites(ZooLedger):
    """Proves its genesis in its own round trip right before every write (a plain
    SET NX then): a forget between the check and the write goes unseen, and the write
    lands in the forgotten store. Its reads prove it in the same script, as they must."""

    def check(self) -> None:
        if self.bound(lambda: self.client.get(self.genesis_key)) != self.genesis:
            raise UnsafeStoreConfig("the store forgot: its identity changed; reopen")

    def write(self, key: str, token: str) -> bool:
        self.check()
        return bool(self.bound(lambda: self.client.set(key, token, nx=True)))


class _Unguarded(ChecksThenWrites):
    """Reads with a plain EXISTS after ``check`` as well."""

    def read(self, key: str) -> bool:
        try:
            self.check()
            return bool(self.bound(lambda: self.client.exists(key)))
        except redis.RedisError as exc:
            raise LedgerUnavailable(f"is_spent failed: {exc}") from exc


class TrustsOnTimer(_Unguarded):
    """Proves its genesis at most every WINDOW seconds and trusts it in between; a
    ``True`` is confirmed by a genesis read after the reply. A forget slower than the
    window is seen by a call after it; a call racing it is not (is_spent says False under
    the old id). Its forget hook is as slow as a subprocess's."""

    def __init__(self, label: str, host: str, port: int) -> None:
        self._checked = -WINDOW
        self._lock = threading.Lock()
        super().__init__(label, host, port)

    def check(self) -> None:
        with self._lock:
            if time.monotonic() - self._checked < WINDOW:
                return
        super().check()
        with self._lock:
            self._checked = time.monotonic()

    def write(self, key: str, token: str) -> bool:
        won = super().write(key, token)
        if won:
            super().check()  # uncached: a True is confirmed
        return won


class StoreWideGenesis(ZooLedger):
    """One genesis for the whole server, proven in the same script as every spend, and a
    store_id per namespace derived from it: emptying one namespace keeps its store_id."""

    def __init__(self, label: str, host: str, port: int) -> None:
        super().__init__(label, host, port)
        self.genesis_key = "zoo-id-store"  # re-opened on the store-wide key
        try:
            self.client.set(self.genesis_key, self.genesis, nx=True)
            value = self.client.get(self.genesis_key)
            self.genesis = value if isinstance(value, bytes) else b""
        except redis.RedisError as exc:
            self.client.close()
            raise LedgerUnavailable(f"zoo redis unreachable: {exc}") from exc
        self.store_id = f"zoo:{self.genesis!s}:{label}"


class _OwnServer:
    """A factory on this process's own redis-server, with its forget hook; ``delay``
    makes the forget as slow as a subprocess would be."""

    def __init__(self, cls: type[Any], delay: float = 0.0) -> None:
        self.cls = cls
        self.delay = delay
        self.__name__ = self.__qualname__ = cls.__name__

    def __call__(self, ctx: LedgerContext) -> Any:
        return restartable.open_own(self.cls, ctx)

    def ledger_forget(self, namespace: str | None = None) -> None:
        restartable.forget(namespace)
        time.sleep(self.delay)  # the hook's own duration, not a wait for the ledger


trusts_on_timer = _OwnServer(TrustsOnTimer, SLOW_FORGET)
store_wide_genesis = _OwnServer(StoreWideGenesis)
checks_then_writes = _OwnServer(ChecksThenWrites)
