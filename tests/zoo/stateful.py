"""Mutants only the generated sequences (M1), the interrupted calls (C5, C10) and the
racing first opens (C6) catch. Each is the zoo's correct ledger but for one bug;
``EXPECTED`` and ``ONLY_CAUGHT_BY`` have the shape of ``tests.zoo.mutants``'s.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import redis

from ledger_conformance import LedgerContext
from ledger_core.errors import AmbiguousSpend
from ledger_core.reentry import attempt_digest

from .base import GUARD, TIMEOUT, AsyncReentrantZooLedger, AsyncZooLedger, ZooLedger, build
from .reentry import ReentrantZooLedger

# -- M1: a recovery at open that deletes the wrong phase's records ----------------------

BATCH = "batch|"


class BatchZooLedger(ZooLedger):
    """The zoo's ledger with batches: each id of ``spend_many`` written as a spend would
    be, its token marked as a batch's, its key kept in the store's list of batch keys
    (what a recovery at open goes through)."""

    def batch_keys(self) -> str:
        return f"zoo-batches:{self.label.encode().hex()}"

    def spend_many(self, request_ids: Sequence[str]) -> list[bool]:
        answers = []
        for request_id in request_ids:
            key = self.key(request_id)
            token = BATCH + uuid.uuid4().hex
            try:
                self.client.sadd(self.batch_keys(), key)
                answers.append(self.write(key, token))
            except redis.RedisError as exc:
                answers.append(self.on_spend_failure(key, token, exc))
        return answers

    def is_spent_many(self, request_ids: Sequence[str]) -> list[bool]:
        return [self.is_spent(request_id) for request_id in request_ids]


class RecoversWrongPhase(BatchZooLedger):
    """At open, clears what it takes for abandoned batches, and matches the committed
    marker instead of a pending one: every id a batch spent is gone after a reopen."""

    def __init__(self, label: str, host: str, port: int) -> None:
        super().__init__(label, host, port)
        for key in self.client.smembers(self.batch_keys()):
            value = self.client.get(key)
            if isinstance(value, bytes) and value.startswith(BATCH.encode()):
                self.client.delete(key)


class Hops(AsyncZooLedger):
    """An async face that runs each step of a call on the ledger's worker threads."""

    async def _hop(self, fn: Callable[..., Any], *args: object) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)


class AsyncBatchZooLedger(Hops):
    async def spend_many(self, request_ids: Sequence[str]) -> Any:
        return await self._hop(self.sync.spend_many, list(request_ids))

    async def is_spent_many(self, request_ids: Sequence[str]) -> Any:
        return await self._hop(self.sync.is_spent_many, list(request_ids))


def _faced(cls: type[Any], face: type[Any], ctx: LedgerContext) -> Any:
    """``cls`` for ``ctx``, its async flavor behind ``face``."""
    made = build(cls, ctx)
    return face(made.sync) if ctx.flavor == "async" else made


def recovers_wrong_phase(ctx: LedgerContext) -> Any:
    return _faced(RecoversWrongPhase, AsyncBatchZooLedger, ctx)


# -- C5 and C10: an async write in two steps, left half-written by a cancel -------------

PENDING = "pending|"
# 1 when KEYS[2] still holds ARGV[2] and now holds ARGV[3].
GUARDED_COMMIT = GUARD + (
    "if redis.call('GET', KEYS[2]) == ARGV[2] then\n"
    "  redis.call('SET', KEYS[2], ARGV[3]) return 1 end\n"
    "return 0"
)


class TwoStepZooLedger(ZooLedger):
    """Sync spends as the zoo's; the async face claims an id, then commits the claim."""

    def commit(self, key: str, claim: str, final: str) -> bool:
        return bool(self.guarded(GUARDED_COMMIT, key, claim, final))

    def resolve(self, key: str, claim: str, final: str, failure: Exception) -> bool:
        """C5 after a failed step: ours when the store holds our claim (then committed)
        or our final value; another's otherwise; unknown raises."""
        stored = self.read_back(key, failure)
        if stored == final.encode():
            return True
        if stored != claim.encode():
            return False
        try:
            return self.commit(key, claim, final)
        except redis.RedisError as exc:
            raise AmbiguousSpend(f"spend claimed, commit failed: {exc}") from exc


class AsyncTwoStep(Hops):
    """Two thread hops per spend, a claim then its commit. A spend cancelled between
    them leaves its claim, and the next spend of that id on this instance resumes it as
    if it were the same call's retry: but the claim landed, and its caller never heard."""

    def __init__(self, sync: Any) -> None:
        super().__init__(sync)
        self._cancelled: dict[str, str] = {}  # key -> the claim its cancelled spend left

    async def spend(self, request_id: str) -> Any:
        sync = self.sync
        key, token = sync.key(request_id), uuid.uuid4().hex
        resumed = self._cancelled.pop(key, None)
        claim = resumed or PENDING + token
        try:
            if resumed is None and not await self._hop(sync.write, key, claim):
                return False
            return await self._hop(sync.commit, key, claim, token)
        except asyncio.CancelledError:
            self._cancelled[key] = claim
            raise
        except redis.RedisError as exc:
            return await self._hop(sync.resolve, key, claim, token, exc)


def resumes_cancelled_claim(ctx: LedgerContext) -> Any:
    """C5: a retry that resumes the claim a cancelled spend left answers True, though
    that claim had landed (an is_spent already said spent)."""
    return _faced(TwoStepZooLedger, AsyncTwoStep, ctx)


class HalfWrittenAs(ReentrantZooLedger, TwoStepZooLedger):
    """The async ``spend_as`` records the id as a plain spend would, then adds the key's
    digest: a cancel between the two leaves a record no key holds."""

    def resolve_as(self, key: str, token: str, final: str, digest: str, failure: Exception) -> bool:
        stored = self.read_back(key, failure)
        if stored == token.encode():
            return self.resolve(key, token, final, failure)
        return self.holds(stored, digest)


class AsyncHalfWrittenAs(Hops, AsyncReentrantZooLedger):
    async def spend_as(self, request_id: str, attempt_key: str) -> Any:
        sync = self.sync
        digest = attempt_digest(attempt_key).hex()
        key, token = sync.key(request_id), uuid.uuid4().hex
        final = f"{token}|{digest}"
        try:
            if not await self._hop(sync.write, key, token):
                return sync.holds(await self._hop(sync.client.get, key), digest)
            return await self._hop(sync.commit, key, token, final)
        except redis.RedisError as exc:
            return await self._hop(sync.resolve_as, key, token, final, digest, exc)


def half_written_on_cancel(ctx: LedgerContext) -> Any:
    return _faced(HalfWrittenAs, AsyncHalfWrittenAs, ctx)


# -- C6: a genesis created by a read, then a write ----------------------------------------


class RacyGenesis(ZooLedger):
    """Creates its genesis with GET then SET (no NX) and trusts what it wrote: two first
    opens racing both find none, and each takes its own value for the store's identity."""

    def __init__(self, label: str, host: str, port: int) -> None:
        client = redis.Redis(host=host, port=port, socket_timeout=TIMEOUT)
        genesis_key = f"zoo-id:{label.encode().hex()}"
        ours = None
        try:
            if client.get(genesis_key) is None:
                time.sleep(0.005)  # widen the window the mutant has anyway
                ours = uuid.uuid4().hex.encode()
                client.set(genesis_key, ours)
        finally:
            client.close()
        super().__init__(label, host, port)
        if ours is not None:  # the one it wrote, not the one the store holds now
            self.genesis = ours
            self.store_id = self.identity()


def racy_genesis(ctx: LedgerContext) -> Any:
    return build(RacyGenesis, ctx)


EXPECTED: dict[str, tuple[str, str, str]] = {
    "recovers_wrong_phase": ("M1", "M1", "quick"),
    "resumes_cancelled_claim": ("C5", "C5_interrupted", "quick"),
    "half_written_on_cancel": ("C10", "C10_interrupted", "quick"),
    "racy_genesis": ("C6", "C6_new_store", "quick"),
}

ONLY_CAUGHT_BY: dict[str, str] = {
    # and C2's final re-read: the axes parts spend through spend_many, then reopen
    "recovers_wrong_phase": "not M1 and not C2_every_acknowledged_id_still_spent",
    "resumes_cancelled_claim": "not C5_interrupted",
    "half_written_on_cancel": "not C10_interrupted",
    "racy_genesis": "not C6_new_store",
}
