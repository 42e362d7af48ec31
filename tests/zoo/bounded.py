"""Mutants that C4's bounded-calls clause catches, each under one fault only: callers
that wait in turn (a black hole makes each wait out the others' timeouts) and a timeout
per read (a reply trickling a byte at a time never trips it)."""

from __future__ import annotations

import threading
from typing import Any

import redis

from ledger_core.errors import LedgerUnavailable

from .base import GUARDED_GET, ZooLedger, factory_of

_TURN = threading.Lock()  # one for the whole process, like a shared client's lock


class WaitsInTurn(ZooLedger):
    """Every call holds one process-wide lock around its round trips: under a black
    hole the 16th caller waits out 15 timeouts first."""

    def spend(self, request_id: str) -> Any:
        with _TURN:
            return super().spend(request_id)

    def is_spent(self, request_id: str) -> Any:
        with _TURN:
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
