"""MongoDB ledger vs the raw driver call, in one run: ``python -m bench.bench_mongodb``.

Uses ``LEDGER_TEST_MONGODB_URL`` or the harness's server (tests/servers/mongodb.py:
mongod, a container, else nx-27017), then measures, interleaved round by round:

* sync, one thread: ``MongoLedger.spend`` vs ``insert_one`` of the same document shape
  with the same write concern (w="majority", j=True) on the same ``MongoClient``, and
  cachelib's ``MongoDbCache.add`` (no timeout) when cachelib is installed;
* sync, 32 threads sharing that client: the same pair;
* async, 64 tasks on one ``AsyncMongoClient``: ``AsyncMongoLedger.spend`` vs
  ``insert_one``.

Every spend writes a fresh id (the winning path); ``spend_as`` (C10) is timed beside
``spend``. ``--migrate`` first times SQLite -> MongoDB with ``spend_many`` against id
by id. Prints ops/s and ours/raw as the
median of per-round ratios. Bounded by ``BUDGET`` seconds. ``--race`` also runs the
conformance suite's C1 thread clause against cachelib's ``add`` (see :func:`cachelib_factory`).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import statistics
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

from bson.binary import Binary
from pymongo import AsyncMongoClient, MongoClient, WriteConcern

from ledger_conformance import LedgerContext
from ledger_core.ids import ledger_key
from ledger_mongodb import AsyncMongoLedger, MongoLedger
from ledger_mongodb import commands as cmd
from ledger_mongodb.options import DEFAULT_DATABASE
from tests.servers import mongodb as servers

ROUNDS = 7
SYNC_OPS = 200
THREADS = 32
TASKS = 64
BUDGET = 120.0  # seconds
COLLECTION = "bench"
ATTEMPT_KEY = "attempt-key-for-the-bench-0123456789"
MIGRATE_IDS = 20_000


@contextmanager
def _server() -> Iterator[servers.Found]:
    with servers.mongodb() as found:
        yield found


def _raw_key(namespace: str, rid: str, encoding: str) -> Any:
    raw = ledger_key(namespace, rid.encode())
    return Binary(raw) if encoding == cmd.BIN else raw.hex()


def _threads(n: int, run: Callable[[list[str]], None], ids: list[str]) -> None:
    """``n`` threads released together by a barrier, each on its slice of ``ids``."""
    barrier = threading.Barrier(n)
    slices = [ids[i::n] for i in range(n)]

    def worker(part: list[str]) -> None:
        barrier.wait()
        run(part)

    threads = [threading.Thread(target=worker, args=(part,)) for part in slices]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def _sync_rates(found: servers.Found, deadline: float) -> dict[str, dict[str, list[float]]]:
    client: MongoClient[dict[str, Any]] = MongoClient(found.url, timeoutMS=10_000)
    db = client.get_default_database(DEFAULT_DATABASE)
    db.drop_collection(COLLECTION)
    ledger = MongoLedger.from_database(
        db, namespace="bench", collection=COLLECTION, **found.proof_options
    )
    raw = db.get_collection(COLLECTION, write_concern=WriteConcern(w="majority", j=True))
    encoding = ledger._store.encoding
    counter = iter(range(10**9))
    token = os.urandom(16)

    def ids(n: int) -> list[str]:
        base = next(counter)
        return [f"bench-{base}-{i}" for i in range(n)]

    def raw_insert(part: list[str]) -> None:
        for rid in part:
            raw.insert_one({"_id": _raw_key("raw", rid, encoding), "t": Binary(token), "ns": "raw"})

    def raw_insert_and_read(part: list[str]) -> None:
        # The two round trips a spend takes where no collection UUID guards the insert
        # (MongoDB < 6.0, nx-27017): the insert, then the record and genesis read back.
        for rid in part:
            key = _raw_key("raw", rid, encoding)
            raw.insert_one({"_id": key, "t": Binary(token), "ns": "raw"})
            raw.find_one({"_id": {"$in": [key, "genesis\x00raw"]}})

    def ours(part: list[str]) -> None:
        for rid in part:
            ledger.spend(rid)

    def ours_as(part: list[str]) -> None:
        for rid in part:
            ledger.spend_as(rid, ATTEMPT_KEY)

    contenders: dict[str, Callable[[list[str]], None]] = {
        "raw insert_one": raw_insert,
        "ledger spend": ours,
        "ledger spend_as": ours_as,
    }
    if ledger._store.uuid is None:
        contenders["raw insert+read"] = raw_insert_and_read
    try:
        from cachelib.mongodb import MongoDbCache

        cache = MongoDbCache(client=client, db=db.name, collection="bench_cachelib")

        def cachelib_add(part: list[str]) -> None:
            for rid in part:
                cache.add(rid, token, timeout=0)

        contenders["cachelib add"] = cachelib_add
    except ImportError:
        pass
    one: dict[str, list[float]] = {name: [] for name in contenders}
    many: dict[str, list[float]] = {
        name: [] for name in ("raw insert_one", "raw insert+read", "ledger spend") if name in one
    }
    for run in contenders.values():
        run(ids(20))  # warm up
    for _ in range(ROUNDS):
        for name, run in contenders.items():
            batch = ids(SYNC_OPS)
            started = time.perf_counter()
            run(batch)
            one[name].append(SYNC_OPS / (time.perf_counter() - started))
        for name in many:
            batch = ids(SYNC_OPS * 2)
            started = time.perf_counter()
            _threads(THREADS, contenders[name], batch)
            many[name].append(len(batch) / (time.perf_counter() - started))
        if time.monotonic() > deadline:
            break
    ledger.close()
    client.close()
    return {"sync, one thread": one, f"sync, {THREADS} threads": many}


async def _async_rates(found: servers.Found, deadline: float) -> dict[str, list[float]]:
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(found.url, timeoutMS=10_000)
    db = client.get_default_database(DEFAULT_DATABASE)
    ledger = await AsyncMongoLedger.from_database(
        db, namespace="bench-async", collection=COLLECTION, **found.proof_options
    )
    raw = db.get_collection(COLLECTION, write_concern=WriteConcern(w="majority", j=True))
    encoding = ledger._store.encoding
    token = os.urandom(16)
    counter = iter(range(10**9))

    async def fan_out(call: Callable[[str], Awaitable[Any]]) -> None:
        base = next(counter)
        queue = iter(range(SYNC_OPS * 2))

        async def worker() -> None:
            for i in queue:
                await call(f"bench-{base}-{i}")

        await asyncio.gather(*(worker() for _ in range(TASKS)))

    async def raw_insert(rid: str) -> None:
        key = _raw_key("raw-async", rid, encoding)
        await raw.insert_one({"_id": key, "t": Binary(token), "ns": "raw-async"})

    contenders: dict[str, Callable[[str], Awaitable[Any]]] = {
        "raw insert_one": raw_insert,
        "ledger spend": ledger.spend,
    }
    rates: dict[str, list[float]] = {name: [] for name in contenders}
    await fan_out(raw_insert)  # open the connections before timing
    for _ in range(ROUNDS):
        for name, call in contenders.items():
            started = time.perf_counter()
            await fan_out(call)
            rates[name].append(SYNC_OPS * 2 / (time.perf_counter() - started))
        if time.monotonic() > deadline:
            break
    await ledger.aclose()
    await client.close()
    return rates


def _report(title: str, rates: dict[str, list[float]], pairs: list[tuple[str, str]]) -> None:
    print(f"\n{title}")
    for name, values in rates.items():
        if values:
            print(
                f"  {name:<16} median {statistics.median(values):>8,.0f} ops/s   "
                f"best {max(values):>8,.0f} ops/s   ({len(values)} rounds)"
            )
    for ours, theirs in pairs:
        if rates.get(ours) and rates.get(theirs):
            paired = [a / b for a, b in zip(rates[ours], rates[theirs], strict=True)]
            print(f"  ratio {ours} / {theirs}: {statistics.median(paired):.3f}")


class CachelibLedger:
    """cachelib's ``MongoDbCache.add`` shaped as a ledger, for the suite's C1 clause:
    ``add`` reads (``has``) and then upserts, so racing callers can all get ``True``."""

    def __init__(self, url: str, collection: str) -> None:
        from cachelib.mongodb import MongoDbCache

        self._client: MongoClient[dict[str, Any]] = MongoClient(url)
        self._cache = MongoDbCache(
            client=self._client,
            db=self._client.get_default_database(DEFAULT_DATABASE).name,
            collection=collection,
        )

    def spend(self, request_id: str) -> bool:
        return bool(self._cache.add(request_id, b"x", timeout=0))

    def close(self) -> None:
        self._client.close()


def cachelib_factory(ctx: LedgerContext) -> CachelibLedger:
    """``--ledger-factory bench.bench_mongodb:cachelib_factory`` (needs
    ``LEDGER_TEST_MONGODB_URL``)."""
    label = hashlib.sha256(ctx.store.encode()).hexdigest()[:16]
    return CachelibLedger(os.environ[servers.ENV], f"cachelib_{label}")  # nx: identifiers only


class _OneByOne:
    """A target without its batch calls: migration then spends and reads id by id."""

    def __init__(self, ledger: MongoLedger) -> None:
        self._ledger = ledger

    def __getattr__(self, name: str) -> Any:
        if name in ("spend_many", "is_spent_many"):
            raise AttributeError(name)
        return getattr(self._ledger, name)


def _migrate_rates(found: servers.Found) -> None:
    """SQLite -> MongoDB, ``MIGRATE_IDS`` ids: batched (``spend_many``) vs id by id."""
    import tempfile
    from pathlib import Path

    from ledger_core import migrate
    from ledger_sqlite import SQLiteLedger

    with tempfile.TemporaryDirectory() as tmp:
        source = SQLiteLedger(Path(tmp) / "old.db")
        source.spend_many([f"request-{i:08d}" for i in range(MIGRATE_IDS)])
        print(f"\nmigrate SQLite -> MongoDB, {MIGRATE_IDS:,} ids")
        for label, wrap in (("spend_many", False), ("id by id", True)):
            target = MongoLedger.from_client(
                MongoClient(found.url, timeoutMS=30_000),
                namespace=f"migrate-{wrap}-{os.urandom(4).hex()}",
                collection="bench_migrate",
                **found.proof_options,
            )
            try:
                started = time.perf_counter()
                report = migrate(source, _OneByOne(target) if wrap else target)
                took = time.perf_counter() - started
                print(f"  {label:<12} {report.verified / took:>9,.0f} ids/s ({took:.1f} s)")
            finally:
                target.close()
                target._conn.client.close()
        source.close()


def main() -> None:
    deadline = time.monotonic() + BUDGET
    with _server() as found:
        print(f"server: {found.label} ({found.url})")
        if "--migrate" in sys.argv:
            _migrate_rates(found)
        sync = _sync_rates(found, deadline)
        async_rates = asyncio.run(_async_rates(found, deadline))
        if "--race" in sys.argv:
            import subprocess

            env = {**os.environ, servers.ENV: found.url}
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pytest",
                    "-q",
                    "-p",
                    "no:cacheprovider",
                    "--pyargs",
                    "ledger_conformance",
                    "--ledger-factory",
                    "bench.bench_mongodb:cachelib_factory",
                    "-k",
                    "C1_threads",
                ],
                env=env,
                check=False,
            )
    for title, rates in sync.items():
        pairs = [
            ("ledger spend", "raw insert_one"),
            ("ledger spend", "raw insert+read"),
            ("ledger spend", "cachelib add"),
            ("ledger spend_as", "raw insert_one"),
            ("ledger spend_as", "ledger spend"),
        ]
        _report(title, rates, pairs)
    _report(f"async, {TASKS} tasks", async_rates, [("ledger spend", "raw insert_one")])


if __name__ == "__main__":
    main()
