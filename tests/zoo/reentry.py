"""The zoo's re-entrant ledger (C10) and the mutants only the C10 clauses catch.

``spend_as`` stores ``token|digest`` with ``SET NX`` in the same guarded script as the
zoo's plain spend (one round trip): a plain spend stores the token alone, so it has no
holder. After a failure, the value read back decides (C5): our token, or our digest.
"""

from __future__ import annotations

import time
import uuid

import redis

from ledger_core.reentry import attempt_digest

from .base import GUARD, ZooLedger, factory_of

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
        stored = self.read_back(key, failure)
        return stored == token.encode() or self.holds(stored, digest)


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


correct = factory_of(ReentrantZooLedger)
reenters_any_key = factory_of(ReentersAnyKey)
reenters_plain_spend = factory_of(ReentersPlainSpend)
reentry_check_then_set = factory_of(ReentryCheckThenSet)
reentry_true_after_ambiguous = factory_of(ReentryTrueAfterAmbiguous)
