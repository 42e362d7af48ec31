"""MongoDB: the ledger against ``insert_one`` with a unique ``_id`` and the ledger's own
write concern (``w="majority", j=True``), on the same client and into the same collection.

The server is the harness's (a local ``mongod`` replica set, else nx-27017, which proves
only with ``durability=process``), or the URL given. A ledger spend is two round trips by
design (the insert, then the record and the genesis read back: docs/mongodb.md), so the
raw sequences with the same guarantee, ``insert_one + find`` (and ``find`` of the record
and the genesis for a read), are timed beside it, sync and async: the bars hold the ledger
to them. The peer is cachelib's ``MongoDbCache.add`` (no timeout) on the same client.

``cachelib_factory`` shapes cachelib's ``add`` as a ledger for the conformance suite's
C1 clause (``--ledger-factory bench.stores.mongodb:cachelib_factory``), which shows it racy.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack, asynccontextmanager, contextmanager
from typing import Any

from pymongo import AsyncMongoClient, MongoClient, WriteConcern
from pymongo.errors import DuplicateKeyError
from pymongo.read_concern import ReadConcern

from bench.measure import (
    IS_SPENT,
    PEER,
    SPEND_NEW,
    SPEND_SPENT,
    AsyncContender,
    Bar,
    Contender,
    async_pair,
    ops,
    pair,
)
from bench.stores import Subject, chunks, optional, split_url, versions
from ledger_conformance import LedgerContext
from ledger_mongodb import AsyncMongoLedger, MongoLedger
from ledger_mongodb.options import CLIENT_OPTIONS, DEFAULT_COLLECTION, DEFAULT_DATABASE
from tests.servers import mongodb as servers

NAME = "mongodb"
SCHEMES = ("mongodb", "mongodb+srv")

UNAVAILABLE = servers.ServerUnavailable
RAW_CALLS = "insert_one / find_one"
RAW_SEQUENCE = "insert_one + find"  # a ledger spend's two round trips, raw; a read's one
GENESIS = "genesis\x00raw"  # the raw sequence's genesis, read with each record
# Each operation is held to the raw calls with the same guarantee: the record read with
# its namespace's genesis (a spend: after the insert).
BARS = {op: Bar(against=RAW_SEQUENCE) for op in (SPEND_NEW, SPEND_SPENT, IS_SPENT)}
MAJORITY = WriteConcern(w="majority", j=True)  # the ledger's own concerns
READ_MAJORITY = ReadConcern("majority")
TOKEN = os.urandom(16)


@contextmanager
def server() -> Iterator[str]:
    with servers.mongodb() as found:
        extra = "".join(f"&{k}={v}" for k, v in found.proof_options.items())
        yield found.url + extra


def subject(url: str, stack: ExitStack) -> Subject:
    driver_url, options = split_url(url, CLIENT_OPTIONS)
    client: MongoClient[dict[str, Any]] = MongoClient(driver_url, timeoutMS=30_000)
    stack.callback(client.close)
    db = client.get_default_database(DEFAULT_DATABASE)
    name = str(options.get("collection", DEFAULT_COLLECTION))
    ledger = MongoLedger.from_database(db, **options)
    stack.callback(ledger.close)
    raw = db.get_collection(name, write_concern=MAJORITY, read_concern=READ_MAJORITY)
    guarded = getattr(ledger, "_uuid", None) is not None  # collectionUUID on each command

    def raw_spend(rid: str) -> object:
        try:
            return raw.insert_one({"_id": "raw:" + rid, "t": TOKEN}).acknowledged
        except DuplicateKeyError:  # the raw call's "already spent"
            return False

    def raw_is_spent(rid: str) -> object:
        return raw.find_one({"_id": "raw:" + rid}) is not None

    raw.replace_one({"_id": GENESIS}, {"_id": GENESIS, "t": TOKEN}, upsert=True)

    def read_both(rid: str) -> object:
        found = [d["_id"] for d in raw.find({"_id": {"$in": ["raw:" + rid, GENESIS]}})]
        return "raw:" + rid in found

    def insert_and_read(rid: str) -> object:
        spent = raw_spend(rid)
        read_both(rid)
        return spent

    contenders = pair(ledger, RAW_CALLS, raw_spend, raw_is_spent)
    contenders.append(Contender(RAW_SEQUENCE, PEER, ops(insert_and_read, read_both)))
    cachelib = optional("cachelib.mongodb")
    if cachelib is not None:
        cache = cachelib.MongoDbCache(client=client, db=db.name, collection="bench_cachelib")

        def add(rid: str) -> object:
            return cache.add(rid, TOKEN, timeout=0)

        contenders.append(Contender("cachelib add / has", PEER, ops(add, cache.has)))

    def preload(numbers: range) -> None:
        for part in chunks(len(numbers), 5_000):
            raw.insert_many([{"_id": f"pre:{numbers[i]}", "t": TOKEN} for i in part], ordered=False)

    @asynccontextmanager
    async def open_async() -> AsyncIterator[list[AsyncContender]]:
        aclient: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(driver_url, timeoutMS=30_000)
        aledger = await AsyncMongoLedger.from_client(aclient, database=db.name, **options)
        araw = aclient.get_database(db.name).get_collection(
            name, write_concern=MAJORITY, read_concern=READ_MAJORITY
        )

        async def araw_spend(rid: str) -> object:
            try:
                return (await araw.insert_one({"_id": "raw:" + rid, "t": TOKEN})).acknowledged
            except DuplicateKeyError:
                return False

        async def araw_is_spent(rid: str) -> object:
            return await araw.find_one({"_id": "raw:" + rid}) is not None

        async def aread_both(rid: str) -> object:
            cursor = araw.find({"_id": {"$in": ["raw:" + rid, GENESIS]}})
            return "raw:" + rid in [d["_id"] async for d in cursor]

        async def ainsert_and_read(rid: str) -> object:
            spent = await araw_spend(rid)
            await aread_both(rid)
            return spent

        sequence = AsyncContender(RAW_SEQUENCE, PEER, ops(ainsert_and_read, aread_both))
        try:
            yield [*async_pair(aledger, RAW_CALLS, araw_spend, araw_is_spent), sequence]
        finally:
            await aledger.aclose()
            await aclient.close()

    build: Any = client.admin.command("buildInfo")
    uuids = "commands guarded by collectionUUID" if guarded else "no collection UUIDs"
    return Subject(
        NAME,
        f"MongoDB wire protocol {build.get('version', '?')} ({uuids}, "
        f"durability {ledger.describe().durability})",
        contenders,
        preload,
        open_async,
        versions("pymongo", "nx-27017", "cachelib"),
        [
            "A ledger spend is two round trips (the insert, then the record and the genesis "
            "read back), an `is_spent` one; `insert_one + find` times that raw pair, and "
            "`find` alone the read (the record and the genesis, by `_id $in`)."
        ],
        bars=BARS,
    )


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
    """``--ledger-factory bench.stores.mongodb:cachelib_factory`` (needs
    ``LEDGER_TEST_MONGODB_URL``)."""
    label = hashlib.sha256(ctx.store.encode()).hexdigest()[:16]
    return CachelibLedger(os.environ[servers.ENV], f"cachelib_{label}")  # nx: identifiers only
