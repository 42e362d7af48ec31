"""Mutants only the suite's generated axes catch: each is correct but for one bug on an
axis the rest of the suite holds fixed (long ids in a batch, look-alike escapes, sibling
namespaces, a spawned interpreter, async callers across processes, markers across
stores). ``correct`` is their control: the zoo's re-entrant ledger with batches, markers
and a listing, on both faces. ``EXPECTED`` and ``ONLY_CAUGHT_BY`` have the shape of
``tests.zoo.mutants``'s.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import os
import re
import secrets
import threading
import uuid
from collections.abc import Iterator, Sequence
from typing import Any
from urllib.parse import unquote_plus

import redis

from ledger_conformance import LedgerContext
from ledger_core.ids import validate_marker, validate_request_id

from .base import AsyncReentrantZooLedger, redis_address
from .reentry import ReentrantZooLedger


class AxesZooLedger(ReentrantZooLedger):
    """Correct: spend, ``spend_as``, ``spend_many`` / ``is_spent_many`` (each id as its
    single call would), markers kept with the store's records, and a listing."""

    def spend_many(self, request_ids: Sequence[str]) -> list[bool]:
        for request_id in request_ids:
            validate_request_id(request_id)
        return [self.batch_spend(request_id) for request_id in request_ids]

    def batch_spend(self, request_id: str) -> bool:
        return bool(self.spend(request_id))

    def is_spent_many(self, request_ids: Sequence[str]) -> list[bool]:
        for request_id in request_ids:
            validate_request_id(request_id)
        return [bool(self.is_spent(request_id)) for request_id in request_ids]

    def marker_key(self, marker: bytes) -> str:
        return f"zoo-mark:{self.label.encode().hex()}:{validate_marker(marker).hex()}"

    def spend_marker(self, marker: bytes) -> bool:
        return bool(self.spend_key(self.marker_key(marker)))

    def is_marker_spent(self, marker: bytes) -> bool:
        return self.read(self.marker_key(marker))


class AsyncAxesFace(AsyncReentrantZooLedger):
    """The async face: every method of the sync ledger, on worker threads."""

    async def _run(self, method: str, *args: Any) -> Any:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, getattr(self.sync, method), *args)

    async def spend_many(self, request_ids: Sequence[str]) -> Any:
        return await self._run("spend_many", list(request_ids))

    async def is_spent_many(self, request_ids: Sequence[str]) -> Any:
        return await self._run("is_spent_many", list(request_ids))

    async def spend_marker(self, marker: bytes) -> Any:
        return await self._run("spend_marker", marker)

    async def is_marker_spent(self, marker: bytes) -> Any:
        return await self._run("is_marker_spent", marker)

    async def spent_ids(self) -> list[str]:
        return list(await self._run("spent_ids"))


def build(cls: type[AxesZooLedger], ctx: LedgerContext, face: type[Any] = AsyncAxesFace) -> Any:
    upstream = redis_address()
    host, port = ctx.route(*upstream)
    sync = cls(ctx.store, host, port)
    sync.routed = (host, port) != upstream
    return face(sync) if ctx.flavor == "async" else sync


def correct(ctx: LedgerContext) -> Any:
    """The control: every capability, no bug."""
    return build(AxesZooLedger, ctx)


# -- long ids in the batch path ----------------------------------------------------------


class BatchTruncatesLongIds(AxesZooLedger):
    """spend_many records an id by its first 255 bytes (a batch statement's parameter
    typed VARCHAR(255)); the single calls are exact."""

    def batch_spend(self, request_id: str) -> bool:
        cut = validate_request_id(request_id)[:255].decode("utf-8", "ignore")
        return bool(self.spend(cut))


class BatchTrueForSpent(AxesZooLedger):
    """spend_many answers True for every id it sent (a pipeline's replies read as "sent",
    not as "inserted"): an id already spent is told True again."""

    def batch_spend(self, request_id: str) -> bool:
        self.spend(request_id)
        return True


# -- look-alike escapes -------------------------------------------------------------------


class PercentDecodesIds(AxesZooLedger):
    """Keys an id by its URL-decoded form (the id came through a query string once):
    ``a b``, ``a%20b`` and ``a+b`` are one id, and so are ``A`` and ``%41``."""

    def key(self, request_id: str) -> str:
        validate_request_id(request_id)
        return super().key(unquote_plus(request_id))


# -- sibling namespaces -------------------------------------------------------------------


class FoldsNamespacePunctuation(AxesZooLedger):
    """Turns the namespace into a key name by replacing punctuation with ``_`` (as a
    table name would need): ``b:x``, ``b-x`` and ``b_x`` are one store."""

    def __init__(self, label: str, host: str, port: int) -> None:
        super().__init__(re.sub(r"[^0-9A-Za-z]", "_", label), host, port)


# -- a spawned interpreter ------------------------------------------------------------------

_SALT = secrets.token_bytes(16)  # drawn at import: forked children inherit it


class SaltedAtImport(AxesZooLedger):
    """Keys an id by an HMAC under a secret drawn when the module is imported: every
    forked child shares it, a freshly spawned interpreter draws its own."""

    spent_ids = None  # type: ignore[assignment]  # a keyed hash cannot be listed back

    def key(self, request_id: str) -> str:
        raw = validate_request_id(request_id)
        digest = hmac.new(_SALT, raw, hashlib.sha256).hexdigest()
        return f"zoo-salted:{self.label.encode().hex()}:{digest}"


# -- async callers across processes ---------------------------------------------------------


class PerId:
    """A lock per id in this process: spends of one id here take turns (spends of others
    never wait). A fork starts with fresh ones."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.locks: dict[str, threading.Lock] = {}

    def of(self, key: str) -> threading.Lock:
        with self.lock:
            return self.locks.setdefault(key, threading.Lock())


_PER_ID = [PerId()]
os.register_at_fork(after_in_child=lambda: _PER_ID.__setitem__(0, PerId()))


class AsyncChecksThenSets(AxesZooLedger):
    """Spends of one id take turns in this process (a lock per id); the sync path writes
    with ``SET NX``, the async path reads, then writes without a condition. In one
    process the turns make every path right; two processes' async calls, or one's async
    and another's sync, both win."""

    def spend(self, request_id: str) -> Any:
        with _PER_ID[0].of(self.key(request_id)):
            return super().spend(request_id)

    def spend_checked(self, request_id: str) -> bool:
        key, token = self.key(request_id), uuid.uuid4().hex
        with _PER_ID[0].of(key):
            if self.read(key):
                return False
            try:
                self.bound(lambda: self.client.set(key, token))
            except redis.RedisError as exc:
                return self.on_spend_failure(key, token, exc)  # C5: the token read back
            return True


class AsyncCheckThenSetFace(AsyncAxesFace):
    """Its async spend: the claimed read-then-write."""

    async def spend(self, request_id: str) -> Any:
        return await self._run("spend_checked", request_id)


# -- listing long ids --------------------------------------------------------------------------


class ListingDropsLongIds(AxesZooLedger):
    """The listing skips ids over 512 bytes (its page's row type holds 512)."""

    def spent_ids(self) -> Iterator[str]:
        return iter([i for i in super().spent_ids() if len(i.encode()) <= 512])


# -- markers across stores ---------------------------------------------------------------------


class MarkersStoreWide(AxesZooLedger):
    """Keeps markers in one key space for the whole server, without the store's label."""

    def marker_key(self, marker: bytes) -> str:
        return f"zoo-mark:{validate_marker(marker).hex()}"


class AsyncUnlistedFace(AsyncAxesFace):
    spent_ids = None  # type: ignore[assignment]  # as its sync ledger: no listing


def _factory(cls: type[AxesZooLedger], face: type[Any] = AsyncAxesFace) -> Any:
    def factory(ctx: LedgerContext) -> Any:
        return build(cls, ctx, face)

    return factory


batch_truncates_long_ids = _factory(BatchTruncatesLongIds)
batch_true_for_spent = _factory(BatchTrueForSpent)
percent_decodes_ids = _factory(PercentDecodesIds)
folds_namespace_punctuation = _factory(FoldsNamespacePunctuation)
salted_at_import = _factory(SaltedAtImport, AsyncUnlistedFace)
async_checks_then_sets = _factory(AsyncChecksThenSets, AsyncCheckThenSetFace)
listing_drops_long_ids = _factory(ListingDropsLongIds)
markers_store_wide = _factory(MarkersStoreWide)

# factory name -> (clause the suite must fail, -k selection, profile)
EXPECTED: dict[str, tuple[str, str, str]] = {
    "batch_truncates_long_ids": ("C1", "C1_axes_spend_many", "quick"),
    "batch_true_for_spent": ("C1", "C1_axes_spend_many", "quick"),
    "percent_decodes_ids": ("C8", "C8_axes_families", "quick"),
    "folds_namespace_punctuation": ("C7", "C7_axes_sibling", "quick"),
    "salted_at_import": ("C3", "C3_axes_every_instance", "quick"),
    "async_checks_then_sets": ("C1", "C1_axes_every_caller", "quick"),
    "listing_drops_long_ids": ("L1", "L1_axes_long", "quick"),
    "markers_store_wide": ("H3", "H3_axes_markers", "quick"),
}

# factory name -> -k selection of the whole suite without the axis that catches it
ONLY_CAUGHT_BY: dict[str, str] = {
    # the batch path: its own answers, the reads and the listing of what it recorded
    "batch_truncates_long_ids": "not C1_axes_spend_many and not C3_axes_is_spent_many "
    "and not L1_axes_long",
    # and M1, whose sequences compare spend_many's answers with the model
    "batch_true_for_spent": "not C1_axes_spend_many and not C8_axes_families and not M1",
    "percent_decodes_ids": "not C8_axes_families",
    "folds_namespace_punctuation": "not C7_axes_sibling",
    # a spawned interpreter: its reads and its racers, and M1's calls from one (whose
    # spends the final re-read then reads in this process)
    "salted_at_import": "not C3_axes_every_instance and not C1_axes_every_caller and not M1 "
    "and not C2_every_acknowledged_id_still_spent",
    # and C6's brand-new stores: processes race spends there too, async among them
    "async_checks_then_sets": (
        "not C1_axes_every_caller and not C1_axes_spend_many and not C6_new_store_opened_at_once"
    ),
    "listing_drops_long_ids": "not L1_axes_long",
    # markers across stores: the two stores of H3, and C8's per-flavor marker stores
    "markers_store_wide": "not H3_axes_markers and not C8_axes_families",
}
