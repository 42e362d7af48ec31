"""The zoo's re-entrant ledger (C10) and the mutants only the C10 clauses catch.

``spend_as`` stores ``token|digest`` with ``SET NX`` in the same guarded script as the
zoo's plain spend (one round trip): a plain spend stores the token alone, so it has no
holder. After a failure, the value read back decides (C5): our token, or our digest.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import redis

from ledger_conformance import LedgerContext
from ledger_core.errors import AmbiguousSpend, LedgerUnavailable
from ledger_core.reentry import attempt_digest

from .base import GUARD, GUARDED_GET, AsyncZooLedger, ZooLedger, redis_address

# 1 when this call recorded the id, else the value that holds it.
GUARDED_SET_AS = (
    GUARD + "if redis.call('SET', KEYS[2], ARGV[2], 'NX') then return 1 end\n"
    "return redis.call('GET', KEYS[2])"
)


class ReentrantZooLedger(ZooLedger):
    """Correct: passes C10. Mutants override one hook each."""

    def spend_as(self, request_id: str, attempt_key: str) -> bool:
        digest = attempt_digest(attempt_key).hex()  # validates the key: before any I/O
        key = self.key(request_id)
        token = f"{uuid.uuid4().hex}|{digest}"
        try:
            return self.write_as(key, token, digest)
        except redis.RedisError as exc:
            return self.on_spend_as_failure(key, token, digest, exc)

    def write_as(self, key: str, token: str, digest: str) -> bool:
        result = self.guarded(GUARDED_SET_AS, key, token)
        return result == 1 or self.holds(result, digest)

    def holds(self, stored: object, digest: str) -> bool:
        """Whether the stored value names ``digest`` as its holder (a plain spend: none)."""
        return isinstance(stored, bytes) and stored.partition(b"|")[2] == digest.encode()

    def on_spend_as_failure(self, key: str, token: str, digest: str, failure: Exception) -> bool:
        try:
            stored = self.guarded(GUARDED_GET, key)
        except redis.RedisError as exc:
            raise AmbiguousSpend(f"spend_as failed ({failure}); outcome unknown ({exc})") from exc
        if stored is None:
            raise LedgerUnavailable(f"spend_as did not land: {failure}") from failure
        return stored == token.encode() or self.holds(stored, digest)


class AsyncReentrantZooLedger(AsyncZooLedger):
    async def spend_as(self, request_id: str, attempt_key: str) -> Any:
        return await asyncio.get_running_loop().run_in_executor(
            self._pool, self.sync.spend_as, request_id, attempt_key
        )


class ReentersAnyKey(ReentrantZooLedger):
    """Any key re-enters an id some spend_as recorded: the digest is never compared."""

    def holds(self, stored: object, digest: str) -> bool:
        return isinstance(stored, bytes) and b"|" in stored


class ReentersPlainSpend(ReentrantZooLedger):
    """An id a plain spend recorded (no holder) is re-entered by any key."""

    def holds(self, stored: object, digest: str) -> bool:
        return isinstance(stored, bytes) and (b"|" not in stored or super().holds(stored, digest))


class ReentryCheckThenSet(ReentrantZooLedger):
    """Reads the holder, then writes: two keys racing on a fresh id both win."""

    def write_as(self, key: str, token: str, digest: str) -> bool:
        stored = self.client.get(key)
        if stored is not None:
            return self.holds(stored, digest)
        time.sleep(0.002)  # widen the window the mutant has anyway
        self.client.set(key, token)
        return True


class ReentryTrueAfterAmbiguous(ReentrantZooLedger):
    """After an unknown outcome, assumes its spend_as landed instead of reading back."""

    def on_spend_as_failure(self, key: str, token: str, digest: str, failure: Exception) -> bool:
        return True


def _factory(cls: type[ReentrantZooLedger]) -> Any:
    def factory(ctx: LedgerContext) -> Any:
        host, port = ctx.route(*redis_address())
        sync = cls(ctx.store, host, port)
        return AsyncReentrantZooLedger(sync) if ctx.flavor == "async" else sync

    factory.__name__ = factory.__qualname__ = cls.__name__
    return factory


correct = _factory(ReentrantZooLedger)
reenters_any_key = _factory(ReentersAnyKey)
reenters_plain_spend = _factory(ReentersPlainSpend)
reentry_check_then_set = _factory(ReentryCheckThenSet)
reentry_true_after_ambiguous = _factory(ReentryTrueAfterAmbiguous)
