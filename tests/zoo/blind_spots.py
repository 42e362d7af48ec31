"""Mutants of the suite's blind spots: each is correct but for one bug that the suite let
through until a clause (or a part of one) was added for it, and that only that part
catches. ``EXPECTED`` and ``ONLY_CAUGHT_BY`` have the shape of ``tests.zoo.mutants``'s;
the meta-test runs both.
"""

from __future__ import annotations

import asyncio
import ctypes
import queue
import threading
import unicodedata
import uuid
import zlib
from collections.abc import Iterator
from typing import Any, ClassVar

import redis

from ledger_conformance import LedgerContext
from ledger_core.ids import MARKER_LEAD, validate_attempt_key, validate_request_id

from .base import AsyncZooLedger, ZooLedger, build, factory_of, redis_address
from .reentry import ReentrantZooLedger

# -- C3 across processes -------------------------------------------------------------


class ProcessCache(ZooLedger):
    """Keeps "not spent" answers in a cache per process (class level, shared by its
    instances), cleared by this process's own spends, before and after each write: every
    read in one process is current; a spend in another process goes unseen."""

    _unspent: ClassVar[set[str]] = set()
    _generation: ClassVar[list[int]] = [0]
    _lock: ClassVar[threading.Lock] = threading.Lock()

    def _forget(self, key: str) -> None:
        with self._lock:
            self._generation[0] += 1
            self._unspent.discard(key)

    def read(self, key: str) -> bool:
        with self._lock:
            if key in self._unspent:
                return False
            generation = self._generation[0]
        value = super().read(key)
        if not value:
            with self._lock:
                if self._generation[0] == generation:  # no spend of ours ran meanwhile
                    self._unspent.add(key)
        return value

    def write(self, key: str, token: str) -> bool:
        self._forget(key)
        try:
            return super().write(key, token)
        finally:
            self._forget(key)


# -- C6 over the store's life ------------------------------------------------------------

SEGMENT = 4_096


class StoreIdBySegment(ZooLedger):
    """Names the store's current segment (one per 4,096 records) instead of the store:
    the same for every instance, until the store grows."""

    @property
    def store_id(self) -> str | None:
        count = int(self.client.get(self._counter()) or 0)
        return f"zoo:{self.genesis!s}:segment-{count // SEGMENT}"

    @store_id.setter
    def store_id(self, value: str | None) -> None:
        """The base class assigns it at open; the segment decides instead."""

    def _counter(self) -> str:
        return f"zoo-records:{self.label.encode().hex()}"

    def write(self, key: str, token: str) -> bool:
        won = super().write(key, token)
        if won:
            self.client.incr(self._counter())
        return won


# -- L1 beyond one page ------------------------------------------------------------------


class SkipsAtPageBoundary(ZooLedger):
    """Lists in pages of 1,000 (sorted keys) and starts each next page one key too far:
    the first key of every page after the first is never listed."""

    def spent_ids(self, page: int = 1000) -> Iterator[str]:
        keys = sorted(self.client.scan_iter(match=self.listing_pattern(), count=1000))
        start = 0
        while start < len(keys):
            for key in keys[start : start + page]:
                yield bytes.fromhex(key.decode().rpartition(":")[2]).decode("utf-8")
            start += page + 1


# -- C8 look-alike ids of other kinds --------------------------------------------------


class WidthFolding(ZooLedger):
    """Keys fold full-width and half-width forms (a width-insensitive collation):
    full-width ABC is ASCII ABC, and a half-width katakana is its full-width form."""

    def key(self, request_id: str) -> str:
        validate_request_id(request_id)
        folded = "".join(
            unicodedata.normalize("NFKC", c) if unicodedata.east_asian_width(c) in "FH" else c
            for c in request_id
        )
        return super().key(folded)


class Crc32Keys(ZooLedger):
    """Keys an id by its CRC-32 (a short hash as the key column): colliding ids merge."""

    spent_ids = None  # type: ignore[assignment]  # a hash cannot be listed back as ids

    def key(self, request_id: str) -> str:
        raw = validate_request_id(request_id)
        return f"zoo-crc:{self.label.encode().hex()}:{zlib.crc32(raw):08x}"


# -- H3 marker text in another encoding ------------------------------------------------


class Latin1Ids(ZooLedger):
    """Encodes an id in Latin-1 when it can (UTF-8 otherwise) and stores markers as their
    bytes in the same key space: a request named by the marker's bytes read as Latin-1
    (``"\\xffclosed-proven\\x00X"``) is that marker."""

    def raw_key(self, raw: bytes) -> str:
        return f"zoo:{self.label.encode().hex()}:{raw.hex()}"

    def key(self, request_id: str) -> str:
        validate_request_id(request_id)
        try:
            raw = request_id.encode("latin-1")
        except UnicodeEncodeError:
            raw = request_id.encode("utf-8")
        return self.raw_key(raw)

    def spend_marker(self, marker: bytes) -> Any:
        key, token = self.raw_key(marker), uuid.uuid4().hex
        try:
            return self.write(key, token)
        except redis.RedisError as exc:
            return self.on_spend_failure(key, token, exc)

    def is_marker_spent(self, marker: bytes) -> Any:
        return self.read(self.raw_key(marker))

    def spent_ids(self) -> Iterator[str]:
        for key in self.client.scan_iter(match=self.listing_pattern(), count=1000):
            raw = bytes.fromhex(key.decode().rpartition(":")[2])
            if raw.startswith(MARKER_LEAD):
                continue  # a marker, not an id
            try:
                yield raw.decode("utf-8")
            except UnicodeDecodeError:
                yield raw.decode("latin-1")


# -- C10 attempt keys sharing a long prefix ------------------------------------------


class TruncatedAttemptKey(ReentrantZooLedger):
    """Validates the whole key but records only its first 64 characters (a key column
    of VARCHAR(64)): keys equal in those are one key."""

    def spend_as(self, request_id: str, attempt_key: str) -> bool:
        validate_attempt_key(attempt_key)
        return super().spend_as(request_id, attempt_key[:64])


# -- C1 between the variants, staggered --------------------------------------------------

ASYNC_LEAD, ASYNC_WINDOW = 0.15, 0.05  # seconds: the async path's set-up, then its gap


class CrossChecking(ZooLedger):
    """Each variant writes its own key with ``SET NX`` after checking the other
    variant's: each variant alone is atomic, and in sequence they agree."""

    own, other = "zoo", "zoo-async"

    def key(self, request_id: str) -> str:
        return f"{self.own}:{super().key(request_id)}"

    def other_key(self, request_id: str) -> str:
        return f"{self.other}:{super().key(request_id)}"

    def other_spent(self, request_id: str) -> bool:
        return self.read(self.other_key(request_id))

    def spend_own(self, request_id: str) -> Any:
        return super().spend(request_id)

    def spend(self, request_id: str) -> Any:
        return False if self.other_spent(request_id) else self.spend_own(request_id)

    def is_spent(self, request_id: str) -> Any:
        return self.read(self.key(request_id)) or self.other_spent(request_id)

    def listing_pattern(self) -> str:
        return f"{self.own}:{super().listing_pattern()}"

    def spent_ids(self) -> Iterator[str]:
        for key in self.client.scan_iter(match=self.listing_pattern(), count=1000):
            yield bytes.fromhex(key.decode().rpartition(":")[2]).decode("utf-8")


class AsyncCrossChecking(CrossChecking):
    own, other = "zoo-async", "zoo"


class SlowAsyncFace:
    """The async variant: a slower path (it sets up for ``ASYNC_LEAD`` s, checks the sync
    record, then takes ``ASYNC_WINDOW`` s before its own ``SET NX``). Released together,
    the fast sync path has written before the async one looks; released later, both win."""

    def __init__(self, sync: CrossChecking) -> None:
        self.sync = sync
        self.store_id = sync.store_id

    async def spend(self, request_id: str) -> Any:
        validate_request_id(request_id)
        await asyncio.sleep(ASYNC_LEAD)
        if await asyncio.to_thread(self.sync.other_spent, request_id):
            return False
        await asyncio.sleep(ASYNC_WINDOW)
        return await asyncio.to_thread(self.sync.spend_own, request_id)

    async def is_spent(self, request_id: str) -> Any:
        return await asyncio.to_thread(self.sync.is_spent, request_id)

    async def aclose(self) -> None:
        self.sync.close()


def variants_race(ctx: LedgerContext) -> Any:
    """The sync variant is fast, the async one slow; they race only when staggered."""
    if ctx.flavor != "async":
        return build(CrossChecking, ctx)
    host, port = ctx.route(*redis_address())
    return SlowAsyncFace(AsyncCrossChecking(ctx.store, host, port))


# -- C2 minute-scale expiry ------------------------------------------------------------


class ExpiresAfterAMinute(ZooLedger):
    """Records expire 60 s after their spend: a cache's default TTL."""

    def write(self, key: str, token: str) -> bool:
        return bool(self.client.set(key, token, nx=True, px=60_000))


# -- crash isolation ---------------------------------------------------------------------


class CrashesOnNul(ZooLedger):
    """Crashes the interpreter (a segfault, as a C extension would) on an id with a NUL."""

    def key(self, request_id: str) -> str:
        if isinstance(request_id, str) and "\x00" in request_id:
            ctypes.string_at(0)  # reads address 0: SIGSEGV
        return super().key(request_id)


# -- C4 after close ---------------------------------------------------------------------


class BuffersAfterClose(ZooLedger):
    """Once closed, keeps spends in a local buffer "to flush on reconnect" and answers
    from it: a spent id spends again, and reads unspent."""

    def __init__(self, label: str, host: str, port: int) -> None:
        super().__init__(label, host, port)
        self._buffer: set[str] | None = None

    def spend(self, request_id: str) -> Any:
        if self._buffer is None:
            return super().spend(request_id)
        key = self.key(request_id)
        fresh = key not in self._buffer
        self._buffer.add(key)
        return fresh

    def is_spent(self, request_id: str) -> Any:
        if self._buffer is None:
            return super().is_spent(request_id)
        return self.key(request_id) in self._buffer

    def close(self) -> None:
        self._buffer = set()
        super().close()


class QueuedAsyncFace(AsyncZooLedger):
    """The async face hands calls to worker threads through a queue; ``aclose`` stops the
    workers, and a call queued after that waits for an answer nobody will give."""

    WORKERS = 16

    def __init__(self, sync: Any) -> None:
        super().__init__(sync)
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        for n in range(self.WORKERS):
            threading.Thread(target=self._serve, name=f"zoo-queued-{n}", daemon=True).start()

    def _serve(self) -> None:
        while (item := self._queue.get()) is not None:
            loop, future, fn, request_id = item
            try:
                outcome = (future.set_result, fn(request_id))
            except Exception as exc:
                outcome = (future.set_exception, exc)
            loop.call_soon_threadsafe(_settle, future, *outcome)

    async def _run(self, fn: Any, request_id: str) -> Any:
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._queue.put((loop, future, fn, request_id))
        return await future

    async def spend(self, request_id: str) -> Any:
        return await self._run(self.sync.spend, request_id)

    async def is_spent(self, request_id: str) -> Any:
        return await self._run(self.sync.is_spent, request_id)

    async def aclose(self) -> None:
        for _ in range(self.WORKERS):
            self._queue.put(None)
        self.sync.close()


def _settle(future: asyncio.Future[Any], setter: Any, value: Any) -> None:
    if not future.done():  # the caller gave up (cancelled) meanwhile
        setter(value)


def waits_after_close(ctx: LedgerContext) -> Any:
    """Correct but for its async face's calls after ``aclose``: they wait forever."""
    if ctx.flavor != "async":
        return build(ZooLedger, ctx)
    host, port = ctx.route(*redis_address())
    return QueuedAsyncFace(ZooLedger(ctx.store, host, port))


process_cache = factory_of(ProcessCache)
store_id_by_segment = factory_of(StoreIdBySegment)
skips_at_page_boundary = factory_of(SkipsAtPageBoundary)
width_folding = factory_of(WidthFolding)
crc32_keys = factory_of(Crc32Keys)
latin1_ids = factory_of(Latin1Ids)
truncated_attempt_key = factory_of(TruncatedAttemptKey)
expires_after_a_minute = factory_of(ExpiresAfterAMinute)
crashes_on_nul = factory_of(CrashesOnNul)
buffers_after_close = factory_of(BuffersAfterClose)

# factory name -> (clause the suite must fail, -k selection, profile)
EXPECTED: dict[str, tuple[str, str, str]] = {
    "process_cache": ("C3", "C3_reads_across", "quick"),
    "store_id_by_segment": ("C6", "C2_volume or C6_store_id_stable", "quick"),
    "skips_at_page_boundary": ("L1", "C2_volume or L1_lists_beyond", "quick"),
    "width_folding": ("C8", "C8_lookalike", "quick"),
    "crc32_keys": ("C8", "C8_edge", "quick"),
    "latin1_ids": ("H3", "H3_ids_that_look_like_markers", "quick"),
    "truncated_attempt_key": ("C10", "C10_keys_sharing", "quick"),
    "variants_race": ("C1", "C1_mixed_staggered", "quick"),
    "buffers_after_close": ("C4", "C4_calls_after_close", "quick"),
    "waits_after_close": ("C4", "C4_calls_after_close", "quick"),
    # thorough re-reads 180 s after the last spend: a 60 s TTL fails every thorough run
    "expires_after_a_minute": ("C2", "C2_after_waiting", "thorough"),
}

# factory name -> -k selection of the whole suite without the part that catches it
_C8_PARTS = "not C8_edge and not C8_lookalike and not C8_generated"
ONLY_CAUGHT_BY: dict[str, str] = {
    # reads across processes: forked, and spawned (C3 every instance); M1 may stumble on
    # it: a read, then a spend in a new interpreter, then a read
    "process_cache": "not C3_reads_across and not C3_axes_every_instance and not M1",
    "store_id_by_segment": "not C6_store_id_stable",
    "skips_at_page_boundary": "not L1_lists_beyond",
    # and every part that draws C8's edge ids or families (the axes parts), by seed
    "width_folding": f"{_C8_PARTS} and not axes",
    # C2 volume's 10,000 ids collide in CRC-32 with a chance of about 1 in 90 a run (the
    # birthday bound): not the clause that is meant to catch it.
    "crc32_keys": f"{_C8_PARTS} and not C2_volume and not axes",
    # and L1 of edge ids: it lists the Latin-1 bytes of 'Ã©' as the UTF-8 of 'é'
    "latin1_ids": "not H3_ids_that_look_like_markers and not L1_axes_long",
    "truncated_attempt_key": "not C10_keys_sharing",
    "variants_race": "not C1_mixed_staggered",
    "buffers_after_close": "not C4_calls_after_close",
    "waits_after_close": "not C4_calls_after_close",
}
