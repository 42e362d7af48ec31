"""Ledgers for the torture campaign's own power test (``tests/torture/test_zoo.py``).

``FlushesLater`` drops acknowledged writes under faults: it records a spend with an
expiry and answers ``True``; a background flusher makes the records permanent a moment
later and, when that fails, drops them ("the spends were acknowledged already"). On a
healthy network it is correct; when a fault hits the flush, acknowledged spends expire.
"""

from __future__ import annotations

import threading
from typing import Any

import redis

from ledger_conformance import LedgerContext

from .base import GUARD, ZooLedger, build
from .mutants import ReadsIdentityOnce

EXPIRY_MS = 500  # the record's life until the flusher makes it permanent (5 flushes)
FLUSH_EVERY = 0.1  # seconds between flushes
GUARDED_SET_PX = (
    GUARD + "if redis.call('SET', KEYS[2], ARGV[2], 'NX', 'PX', ARGV[3]) then return 1 end\n"
    "return 0"
)


class FlushesLater(ZooLedger):
    """Acknowledges a spend before it is permanent; a failed flush is forgotten."""

    def __init__(self, label: str, host: str, port: int) -> None:
        super().__init__(label, host, port)
        self.pending: list[str] = []
        self.lock = threading.Lock()
        self.closed = threading.Event()
        self.flusher = threading.Thread(target=self.flush_loop, daemon=True)
        self.flusher.start()

    def write(self, key: str, token: str) -> bool:
        won = bool(self.guarded(GUARDED_SET_PX, key, token, str(EXPIRY_MS)))
        if won:
            self.later(key)
        return won

    def on_spend_failure(self, key: str, token: str, failure: Exception) -> bool:
        won = super().on_spend_failure(key, token, failure)
        if won:
            self.later(key)
        return won

    def later(self, key: str) -> None:
        with self.lock:
            self.pending.append(key)

    def flush_loop(self) -> None:
        while not self.closed.wait(FLUSH_EVERY):
            with self.lock:
                keys, self.pending = self.pending, []
            if not keys:
                continue
            try:
                pipe = self.client.pipeline(transaction=False)
                for key in keys:
                    pipe.persist(key)
                pipe.execute()
            except redis.RedisError:
                pass  # the defect: these spends were acknowledged, so they "cannot matter"

    def close(self) -> None:
        self.closed.set()
        self.flusher.join(5)
        super().close()


def flushes_later(ctx: LedgerContext) -> Any:
    return build(FlushesLater, ctx)


def reads_identity_once(ctx: LedgerContext) -> Any:
    """The zoo's ``ReadsIdentityOnce`` on ``LEDGER_ZOO_REDIS``: after the store forgets,
    the old instance keeps its store_id and spends forgotten ids again."""
    return build(ReadsIdentityOnce, ctx)
