"""Mutants that C4's bounded-calls clause catches, each under one fault only: callers
that wait in turn (a black hole makes each wait out the others' timeouts) and a timeout
per read (a reply trickling a byte at a time never trips it); and one that C1 after fork
catches only when a parent thread is inside a call at the fork (a lock it holds)."""

from __future__ import annotations

import os
import threading
from typing import Any

import redis

from ledger_core.errors import LedgerUnavailable

from .base import GUARDED_GET, ZooLedger, factory_of

_TURN = [threading.Lock()]  # one for the whole process, like a shared client's lock


def _renew() -> None:
    _TURN[0] = threading.Lock()  # a forked child gets a free one: fork is not its defect


os.register_at_fork(after_in_child=_renew)


class WaitsInTurn(ZooLedger):
    """Every call holds one process-wide lock around its round trips: under a black
    hole the 16th caller waits out 15 timeouts first."""

    def spend(self, request_id: str) -> Any:
        with _TURN[0]:
            return super().spend(request_id)

    def is_spent(self, request_id: str) -> Any:
        with _TURN[0]:
            return super().is_spent(request_id)


class PerReadTimeout(ZooLedger):
    """Only redis-py's per-read socket timeout bounds a call, and a read fetches the
    record's token (a 39-byte reply): sent a byte every 0.5 s, it takes 20 s and never
    trips a 1 s read timeout."""

    def run_script(self, script: str, keys: list[str], args: list[Any]) -> Any:
        return self.client.eval(script, len(keys), *keys, *args)

    def read(self, key: str) -> bool:
        try:
            return self.guarded(GUARDED_GET, key) is not None
        except redis.RedisError as exc:
            raise LedgerUnavailable(f"is_spent failed: {exc}") from exc


waits_in_turn = factory_of(WaitsInTurn)
per_read_timeout = factory_of(PerReadTimeout)


class LockedAcrossFork(ZooLedger):
    """Before each call one thread refreshes a shared check (a round trip, bounded)
    under a lock while the others wait for that round to end: no caller waits long in
    one process, but a fork while a thread is refreshing leaves the lock held and the
    round unfinished in the child, whose every call then waits for ever."""

    def __init__(self, label: str, host: str, port: int) -> None:
        super().__init__(label, host, port)
        self.refreshing = threading.Lock()
        self.round = threading.Event()
        self.round.set()

    def refresh(self) -> None:
        if not self.refreshing.acquire(blocking=False):
            self.round.wait()  # the refresher ends the round (it is bounded)
            return
        self.round = threading.Event()
        try:
            self.bound(lambda: self.client.exists(self.genesis_key))
        except redis.RedisError:
            pass  # the call itself reports the outage
        finally:
            self.round.set()
            self.refreshing.release()

    def spend(self, request_id: str) -> Any:
        self.refresh()
        return super().spend(request_id)

    def is_spent(self, request_id: str) -> Any:
        self.refresh()
        return super().is_spent(request_id)


locked_across_fork = factory_of(LockedAcrossFork)
