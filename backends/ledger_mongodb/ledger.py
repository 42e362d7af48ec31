# Generated from aio.py by scripts/async_to_sync.py: edit that file, not this.
"""The MongoDB ledger, written once in ``aio.py`` (async: over an ``AsyncMongoClient`` or a
host's Motor client) and generated from it into ``ledger.py`` (sync: over a
``MongoClient``), so the two can never decide differently (C9).

A spend is one majority, journaled ``insert`` of ``{_id: key, t: token, ns}`` (C10's
``spend_as``: one upsert), then one ``find`` of the record and the namespace's genesis
before the answer: the proof (docs/mongodb.md, "Identity (C6)"). A read fetches the
genesis with the records in that one ``find``, the genesis last; a listing page is
followed by a genesis read. Where the server has a collection UUID every command carries
it (``collectionUUID``), so a re-created collection fails the very command. Options and
indexes are re-checked every ``recheck`` seconds. Once the store is found changed, the
ledger stays failed closed. A lost reply is settled by sending the same write again and
reading what it left (C5).

Keys (C7/C8): a record's ``_id`` is ``ledger_key(namespace, id)`` as exact bytes: BSON
``BinData`` where the server finds BinData by equality (MongoDB), else the same bytes as
lowercase hex text (nx-27017, whose equality match on BinData finds nothing). The
encoding is probed once when the namespace's genesis is written, and recorded in it, so
every instance keys alike. The genesis ``_id`` is the text ``"genesis\\0" + namespace``:
never hex, never BinData, so no id can name it. (Python ``bytes`` are BinData subtype 0
to BSON, both ways; a ``Binary`` never equals ``bytes``, so keys stay plain ``bytes``.)
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import pymongo
from bson.binary import Binary
from bson.codec_options import CodecOptions
from pymongo import ReadPreference

from ledger_core import notices
from ledger_core.base import ReentrantLedgerBase
from ledger_core.doctor import Check
from ledger_core.errors import (
    AmbiguousSpend,
    LedgerClosed,
    LedgerError,
    LedgerUnavailable,
    Outcome,
    UnsafeStoreConfig,
    missing_namespace,
    missing_store,
)
from ledger_core.forks import PerProcess
from ledger_core.guard import Guard
from ledger_core.ids import first_wins, id_batches, is_marker, ledger_key
from ledger_core.listing import pages
from ledger_core.tokens import new_token

from . import errors, identity
from .identity import Facts
from .options import Settings, client_settings

PRIMARY = ReadPreference.PRIMARY
# Plain dicts, UUIDs as BSON Binary: the same decoding whatever the host's client says.
CODEC: CodecOptions[dict[str, Any]] = CodecOptions()
MAJORITY = {"w": "majority", "j": True}  # acknowledged once a majority journaled it
READ_MAJORITY = {"level": "majority"}
GENESIS_PREFIX = "genesis\x00"
GENESIS_END = "genesis\x01"  # every genesis _id sorts between the prefix and this
PROBE_PREFIX = b"probe\x00"
GENESIS_BYTES = 16
BIN, HEX = "bin", "hex"  # the key encodings a genesis records


class MongoLedger(ReentrantLedgerBase):
    """A ledger in one MongoDB collection: one majority, journaled ``insert`` per spend.
    Open with ``open_ledger`` / ``open_async_ledger``, or ``from_client`` /
    ``from_database`` / ``from_collection`` (a host's client is never closed by the
    ledger)."""

    BATCH = 1000  # records per insert (and keys per read) of spend_many / is_spent_many
    LIST_PAGE = 1000  # documents per listing page

    def __init__(
        self,
        client: Any,
        database: str,
        settings: Settings,
        *,
        owned: bool,
        rebuild: Callable[[], Any] | None = None,
    ) -> None:
        """Bound to ``client``, nothing read yet (:meth:`open_on` reads the store)."""
        self._settings = settings
        self._collection = settings.collection
        self._namespace = settings.namespace
        self._prefix = ledger_key(settings.namespace, b"")
        self._genesis_key = GENESIS_PREFIX + settings.namespace
        self._database = database
        self._owned = owned
        self._closed = False
        self._bind(client)
        # PyMongo is not fork-safe: a forked child builds a client of its own at its
        # first call. A host's client: PyMongo's private ``_duplicate``, the only way
        # to a client with its settings, since reusing it in a child "may not be
        # entirely fork-safe" (PyMongo's warning).
        self._rebuild = rebuild or client._duplicate
        self._process = PerProcess(None, self._forked)
        # What opening reads (:meth:`_open`).
        self._guard = Guard(settings.recheck)  # failed for good; the next re-check
        self._uuid: Any = None  # sent as collectionUUID, where the server has one
        self._genesis: bytes | None = None
        self._binary = True  # keys as BinData, else as hex text (nx-27017)
        self._facts: Facts | None = None
        self._shape: tuple[Any, ...] = ()

    def _bind(self, client: Any) -> None:
        self._client = client
        self._db = client.get_database(self._database)
        self._admin = client.get_database("admin")

    def _forked(self) -> None:
        self._bind(self._rebuild())
        self._owned = True

    @classmethod
    def open_on(
        cls,
        client: Any,
        database: str,
        settings: Settings,
        location: str,
        *,
        owned: bool,
        rebuild: Callable[[], Any] | None = None,
    ) -> MongoLedger:
        """A ledger on ``client`` (closed if opening fails and it is ``owned``)."""
        ledger = cls(client, database, settings, owned=owned, rebuild=rebuild)
        try:
            ledger._open(location)
        except BaseException:
            ledger.close()
            raise
        return ledger

    @classmethod
    def from_client(
        cls, client: Any, *, database: str | None = None, **options: Any
    ) -> MongoLedger:
        """A ledger on a host's client (``MongoClient``; async: ``AsyncMongoClient`` or
        Motor's ``AsyncIOMotorClient``), in its default database unless named; the
        ledger never closes it."""
        name, settings, where = host_client(client, database, options)
        return cls.open_on(client, name, settings, where, owned=False)

    @classmethod
    def from_database(cls, database: Any, **options: Any) -> MongoLedger:
        return cls.from_client(database.client, database=database.name, **options)

    @classmethod
    def from_collection(cls, collection: Any, **options: Any) -> MongoLedger:
        return cls.from_database(collection.database, **of_collection(collection, options))

    # -- the hot path: spend, spend_as, is_spent ---------------------------------------

    def _spend_as(self, request_id: bytes, digest: bytes | None = None) -> bool:
        """One insert of ``{_id, t: token}`` (w majority, journaled), or with ``digest``
        C10's one upsert on the record's ``_id``, namespace and digest (no record: it is
        inserted, the token ``$setOnInsert``; one with this digest is matched, unchanged;
        any other makes the insert fail on its ``_id``); then the proof: the record and
        the genesis read back."""
        self._ready()
        key = self._key(request_id)
        token = new_token()
        ns = self._namespace
        stored: Any = None
        if digest is None:
            what = "spend"
            command: dict[str, Any] = {
                "insert": self._collection,
                "documents": [{"_id": key, "t": token, "ns": ns}],
                "ordered": False,
            }
        else:
            what, stored = "spend_as", (digest if self._binary else digest.hex())
            upsert = {"$setOnInsert": {"t": token}}
            update = {"q": {"_id": key, "ns": ns, "d": stored}, "u": upsert, "upsert": True}
            command = {"update": self._collection, "updates": [update], "ordered": True}
        won, failure = self._write(command, what)
        if won is None:  # unknown: the read decides (a duplicate may be our own write)
            doc = (self._read_back([key], failure, what))[key]
        else:
            found = self._read([key], f"{what} (verify)")
            if key not in found:
                raise self._forgot("the record vanished right after its write")
            doc = found[key]
        # This call's record (its token), or for spend_as the same attempt key's (digest).
        mine = doc.get("t") == token or (stored is not None and doc.get("d") == stored)
        return won is not False and mine

    _spend = _spend_as  # no digest: a plain spend

    def _is_spent(self, request_id: bytes) -> bool:
        self._ready()
        key = self._key(request_id)
        return key in self._read([key], "read")

    def _key(self, request_id: bytes) -> Any:
        """The record's ``_id``: the ledger key's bytes as BinData, or as hex text."""
        raw = self._prefix + request_id
        return raw if self._binary else raw.hex()

    def _ready(self) -> None:
        """Before every operation: refused once closed or failed for good; the store
        re-checked when due (one caller re-checks while the others go on)."""
        if self._closed:
            raise LedgerClosed("this MongoDB ledger was closed")
        self._process.get()  # a forked child's first call: a client of its own
        guard = self._guard
        if guard.failed is not None:
            guard.check()  # raises
        if guard.due(time.monotonic()):
            self._recheck()

    def _command(self, command: Mapping[str, Any], *, admin: bool = False) -> Any:
        """``command`` on the primary, on the ledger's database or ``admin``."""
        db = self._admin if admin else self._db
        return db.command(command, read_preference=PRIMARY, codec_options=CODEC)

    def _write(
        self, command: dict[str, Any], what: str, count: int | None = None
    ) -> tuple[Any, Exception | None]:
        """``(judged reply, None)`` for the write that records ids (``count``: a batch of
        them); when its outcome is unknown, the same write sent again (C5) and ``(None,
        failure)``: a read then decides. A refusal raises; a resend that gets no answer
        (or finds the store forgot) leaves it ambiguous."""
        command["writeConcern"] = MAJORITY
        if self._uuid is not None:
            # MongoDB >= 6.0 refuses the command (CollectionUUIDMismatch) when the
            # collection by this name is not the one opened: noticed before any write.
            command["collectionUUID"] = self._uuid
        try:
            reply = self._command(command)
            return (self._won(reply, what) if count is None else self._won_many(reply, count)), None
        except LedgerError:
            raise
        except Exception as exc:
            failure = exc
        if errors.classify(failure) is not Outcome.UNKNOWN or (
            errors.code_of(failure) in errors.FORGOT_CODES
        ):
            raise self._driver_failure(what, failure) from failure
        try:
            reply = self._command(command)
            _ = self._won(reply, what) if count is None else self._won_many(reply, count)
        except UnsafeStoreConfig:
            raise
        except Exception as exc:
            dropped = self._dropped(errors.code_of(exc))
            if dropped is not None:
                raise dropped from exc
            raise errors.ambiguous(failure, exc) from failure
        return None, failure

    def _won(self, reply: Mapping[str, Any], what: str) -> bool | None:
        """A spend's insert or spend_as's upsert: ``True`` recorded (or matched our
        digest), ``False`` a duplicate key, ``None`` unknown (the write concern failed)."""
        write_errors = reply.get("writeErrors")
        if write_errors:
            code = write_errors[0].get("code")
            if code == errors.DUPLICATE_KEY:
                return False
            raise self._dropped(code) or LedgerUnavailable(
                f"MongoDB refused the {what} (code {code})"
            )
        if reply.get("writeConcernError"):
            return None
        if reply.get("upserted") or reply.get("n") == 1:
            return True
        if what == "spend_as":
            return None
        raise LedgerUnavailable(f"MongoDB {what}: unexpected reply n={reply.get('n')!r}")

    def _read(self, keys: list[Any], what: str) -> dict[Any, Mapping[str, Any]]:
        """The records among ``keys`` (by ``_id`` as stored) and the genesis in one
        ``find``, the genesis last: a query may resume on a newer snapshot between
        documents, so a genesis still there after the records proves where they were
        read (BSON sorts text before BinData, hex digits before the genesis's ``g``).
        The genesis must be the one this ledger opened."""
        genesis_key = self._genesis_key
        flt = {"_id": {"$in": [*keys, genesis_key]}}
        order = -1 if self._binary else 1
        command = self._find(flt, {"t": 1, "g": 1, "d": 1}, len(keys) + 1, order)
        try:
            reply = self._command(command)
        except Exception as exc:
            raise self._driver_failure(what, exc) from exc
        records: dict[Any, Mapping[str, Any]] = {}
        genesis = None
        for doc in (reply.get("cursor") or {}).get("firstBatch") or ():
            stored = doc["_id"]
            if isinstance(stored, str) and stored == genesis_key:
                genesis = doc
            else:
                records[stored] = doc
        if self._genesis is not None and (genesis is None or genesis.get("g") != self._genesis):
            raise self._forgot("the namespace's genesis document is gone or different")
        return records

    def _find(
        self,
        flt: Mapping[str, Any],
        projection: Mapping[str, Any],
        size: int,
        order: int = 1,
        *,
        guarded: bool = True,
    ) -> dict[str, Any]:
        """One single-batch ``find``, read concern majority, in ``_id`` order ``order``
        (``guarded``: carrying the collection UUID, where the server has one)."""
        command = {
            "find": self._collection,
            "filter": flt,
            "projection": projection,
            "sort": {"_id": order},
            "limit": size,
            "batchSize": size,
            "singleBatch": True,
            "readConcern": READ_MAJORITY,
        }
        if guarded and self._uuid is not None:
            command["collectionUUID"] = self._uuid
        return command

    # -- failing closed ------------------------------------------------------------------

    def _forgot(self, why: str) -> LedgerError:
        return self._guard.fail(
            UnsafeStoreConfig(
                f"the store forgot or its identity changed since this ledger opened ({why}); "
                "reopen the ledger"
            )
        )

    def _dropped(self, code: Any) -> LedgerError | None:
        """A write error saying the collection is not the one opened: fail closed for good."""
        if code in errors.FORGOT_CODES and self._uuid is not None:
            return self._forgot(f"collection {self._collection!r} was dropped or replaced")
        return None

    def _driver_failure(self, what: str, exc: Exception) -> LedgerError:
        return self._dropped(errors.code_of(exc)) or errors.unavailable(what, exc)

    def _read_back(
        self, keys: list[Any], failure: Exception | None, what: str
    ) -> dict[Any, Mapping[str, Any]]:
        """The records after a write whose outcome is unknown, with the genesis; every one
        must be on the primary, or the outcome stays unknown."""
        try:
            found = self._read(keys, f"{what} (resolve)")
        except UnsafeStoreConfig:
            raise
        except LedgerError as exc:
            raise errors.ambiguous(failure or exc, exc) from (failure or exc)
        if len(found) < len(keys):
            raise errors.ambiguous(
                failure or LedgerUnavailable("write concern not confirmed"),
                LedgerUnavailable("a record written is not on the primary"),
            )
        return found

    def _recheck(self) -> None:
        """Re-read what decides durability (options, indexes, the server) and fail closed
        on any change; a re-check that could not reach the store is due again at once."""
        try:
            facts = self._read_facts(create=False)
        except errors.NotPrimary:
            self._guard.again()  # not a change of store: refused until a primary answers
            raise
        except LedgerError as exc:
            raise self._forgot(f"re-check: {exc}") from exc
        except Exception as exc:
            self._guard.again()
            raise self._driver_failure("re-check", exc) from exc
        if facts.shape(self._settings.durability) != self._shape:
            raise self._forgot("the collection's UUID or options changed")

    # -- opening -------------------------------------------------------------------------

    def _open(self, location: str) -> None:
        """Read the server's facts and the namespace's identity, once (C6)."""
        settings = self._settings
        self._guard = Guard(settings.recheck)
        try:
            facts = self._read_facts(create=settings.create)
            self._uuid = facts.guard_uuid
            self._open_genesis(location)
        except LedgerError:
            raise
        except Exception as exc:
            raise errors.unavailable("open", exc) from exc
        if self._genesis is None and not settings.create:
            where = f"(its genesis document) in MongoDB collection {self._collection!r}"
            raise missing_namespace(self._namespace, where)
        self._facts, self._shape = facts, facts.shape(settings.durability)
        self._info = identity.ledger_info(
            facts,
            location=location,
            namespace=self._namespace,
            genesis=self._genesis,
            database=self._database,
            durability=settings.durability,
        )

    def _server_facts(self) -> tuple[Any, Any, Any, Any]:
        """``hello``, ``buildInfo``, ``serverStatus`` and the replica set's config (the
        last two ``None`` where not permitted); only a writable primary is used."""
        hello = self._command({"hello": 1}, admin=True)
        if not hello.get("isWritablePrimary", hello.get("ismaster")):
            raise errors.NotPrimary(
                "the MongoDB server is not a writable primary: spends and reads must go to "
                "the primary (connect to the replica set, not directly to one member)"
            )
        build = self._command({"buildInfo": 1}, admin=True)
        status = self._optional({"serverStatus": 1, "repl": 0, "metrics": 0, "locks": 0})
        repl = None
        if hello.get("setName"):
            answer = self._optional({"replSetGetConfig": 1})
            repl = None if answer is None else answer.get("config")
        return hello, build, status, repl

    def _read_facts(self, *, create: bool | None) -> Facts:
        """The server's facts, the collection's listCollections entry (created, simple
        collation, when asked; ``None``: a missing one reads as empty) and its indexes."""
        hello, build, status, repl = self._server_facts()
        collection = self._listed() if create is None else self._open_collection(create)
        indexes: list[Mapping[str, Any]] = []
        if collection is not None:
            indexes = errors.first_batch(self._command({"listIndexes": self._collection}))
        return Facts(hello, build, status, repl, collection or {}, indexes)

    def _optional(self, command: Mapping[str, Any]) -> Any:
        """An admin command that may be refused for lack of privileges: ``None`` then."""
        try:
            return self._command(command, admin=True)
        except Exception as exc:
            if errors.classify(exc) is Outcome.REJECTED:
                return None
            raise

    def _listed(self) -> Mapping[str, Any] | None:
        """The collection's listCollections entry, or ``None``: matched by name again,
        since nx-27017 ignores listCollections' filter and lists every collection."""
        listing = {"listCollections": 1, "filter": {"name": self._collection}}
        for entry in errors.first_batch(self._command(listing)):
            if entry.get("name") == self._collection:
                return entry
        return None

    def _open_collection(self, create: bool) -> Mapping[str, Any]:
        """The collection's entry; created when asked, with the simple (binary)
        collation: ids compare exactly (C8)."""
        for attempt in range(2):
            found = self._listed()
            if found is not None:
                return found
            if not create or attempt:
                break
            collation = {"locale": "simple"}
            making = {"create": self._collection, "collation": collation, "writeConcern": MAJORITY}
            try:
                self._command(making)
            except Exception as exc:
                if errors.code_of(exc) != errors.NAMESPACE_EXISTS:  # another opener made it
                    raise errors.unavailable("create collection", exc) from exc
        raise missing_store(f"MongoDB collection {self._collection!r}")

    def _open_genesis(self, location: str) -> None:
        """The namespace's genesis and key encoding: read, or written once when
        ``create`` (racing openers agree: the first insert wins, the others read it)."""
        create = self._settings.create
        for attempt in range(2):
            reply = self._command(self._find({"_id": self._genesis_key}, {}, 1))
            found = errors.first_batch(reply)
            if found:
                self._genesis = bytes(found[0]["g"])
                self._binary = found[0].get("enc", BIN) == BIN
                return
            if not create or attempt:
                return
            encoding = self._probe()
            doc = {
                "_id": self._genesis_key,
                "g": Binary(os.urandom(GENESIS_BYTES)),
                "ns": self._namespace,
                "enc": encoding,
            }
            insert = {"insert": self._collection, "documents": [doc], "writeConcern": MAJORITY}
            reply = self._command(insert)
            errors.check_write_concern(reply, "genesis")
            errors.unless_duplicate(reply, "genesis document")
            if reply.get("n") == 1:  # ours, not a racing opener's
                notices.created(location, self._namespace)

    def _probe(self) -> str:
        """Whether the server finds a BinData ``_id`` by equality (nx-27017 does not):
        then ids are BinData, else lowercase hex text."""
        probe = PROBE_PREFIX + self._namespace.encode("utf-8")
        doc = {"_id": probe, "ns": self._namespace}
        insert = {"insert": self._collection, "documents": [doc], "writeConcern": MAJORITY}
        errors.unless_duplicate(self._command(insert), "key probe")
        reply = self._command(self._find({"_id": probe}, {}, 1, guarded=False))
        found = errors.first_batch(reply)
        return BIN if found and _key_bytes(found[0]["_id"]) == probe else HEX

    # -- batches, listings, reidentify, the doctor ---------------------------------------

    def spend_many(self, request_ids: Sequence[str]) -> list[bool]:
        """Spend a batch: one unordered insert per :attr:`BATCH` ids, each answer what
        ``spend`` would say."""
        batches = id_batches(request_ids, self.BATCH)
        return [won for batch in batches for won in self._spend_batch(batch)]

    def _spend_batch(self, raws: Sequence[bytes]) -> list[bool]:
        """One unordered insert (one token for all): each document succeeds or meets its
        own duplicate key, whatever the others do (a repeat within the batch: ``False``);
        settled and proven with one read of the tokens."""
        self._ready()
        token = new_token()
        keys = [self._key(raw) for raw in raws]
        unique = list(dict.fromkeys(keys))
        docs = [{"_id": key, "t": token, "ns": self._namespace} for key in unique]
        command = {"insert": self._collection, "documents": docs, "ordered": False}
        # Unknown (None): a duplicate now may be our own first write; the read decides.
        won, failure = self._write(command, "spend_many", len(unique))
        found = self._read_back(unique, failure, "spend_many")  # the proof, tokens
        mine = [found[key].get("t") == token for key in unique]
        won = mine if won is None else [a and b for a, b in zip(won, mine, strict=True)]
        return first_wins(keys, [key for key, w in zip(unique, won, strict=True) if w])

    def _won_many(self, reply: Mapping[str, Any], count: int) -> list[bool] | None:
        """Per document of an unordered insert: inserted, or a duplicate; ``None`` when
        the write concern failed."""
        won = [True] * count
        for error in reply.get("writeErrors") or []:
            code = error.get("code")
            if code != errors.DUPLICATE_KEY:
                raise self._dropped(code) or AmbiguousSpend(
                    f"MongoDB refused part of a spend_many batch (code {code}); the other ids "
                    "of the batch may be recorded (treat them as spent)"
                )
            won[int(error.get("index", -1))] = False
        if reply.get("writeConcernError"):
            return None
        if reply.get("n") != won.count(True):
            raise AmbiguousSpend(f"MongoDB spend_many: unexpected reply n={reply.get('n')!r}")
        return won

    def is_spent_many(self, request_ids: Sequence[str]) -> list[bool]:
        """Read a batch: one ``find`` of the records and the genesis per :attr:`BATCH` ids."""
        spent: list[bool] = []
        for batch in id_batches(request_ids, self.BATCH):
            self._ready()
            keys = [self._key(raw) for raw in batch]
            found = self._read(list(dict.fromkeys(keys)), "is_spent_many")
            spent += [key in found for key in keys]
        return spent

    def spent_ids(self) -> Iterator[str]:
        """Every spent request id of this namespace, streamed in pages."""
        return pages(self._ids_page, None)

    def namespaces(self) -> Iterator[str]:
        """Every namespace of this collection (each has a genesis), each once, streamed."""
        return pages(self._namespaces_page, None)

    def _page(self, command: dict[str, Any], what: str) -> list[Mapping[str, Any]]:
        """One listing page's documents, then a read of the genesis (the proof)."""
        self._ready()
        try:
            docs = errors.first_batch(self._command(command))
        except Exception as exc:
            raise self._driver_failure(what, exc) from exc
        self._read([], f"{what} (verify)")
        return docs

    def _ids_page(self, after: Any) -> tuple[list[str], Any]:
        """One page of the namespace's spent ids (markers and the genesis skipped)."""
        # ``after`` has the keys' BSON type (first: the smallest value of it): comparisons
        # bracket by type, so documents of the other encoding never show up.
        if after is None:
            after = b"" if self._binary else ""
        flt = {"ns": self._namespace, "_id": {"$gt": after}}
        docs = self._page(self._find(flt, {"_id": 1}, self.LIST_PAGE), "spent_ids")
        prefix = self._prefix
        ids: list[str] = []
        for doc in docs:
            raw = _key_bytes(doc["_id"])
            if raw is not None and raw.startswith(prefix) and not is_marker(raw[len(prefix) :]):
                ids.append(raw[len(prefix) :].decode("utf-8"))
        return ids, (docs[-1]["_id"] if len(docs) == self.LIST_PAGE else None)

    def _namespaces_page(self, after: Any) -> tuple[list[str], Any]:
        """One page of the collection's namespaces: its genesis documents (the ``_id``
        index only)."""
        flt = {"_id": {"$gt": GENESIS_PREFIX if after is None else after, "$lt": GENESIS_END}}
        docs = self._page(self._find(flt, {"_id": 1}, self.LIST_PAGE), "namespaces")
        names = [
            doc["_id"][len(GENESIS_PREFIX) :]
            for doc in docs
            if isinstance(doc["_id"], str) and doc["_id"].startswith(GENESIS_PREFIX)
        ]
        return names, (docs[-1]["_id"] if len(docs) == self.LIST_PAGE else None)

    def reidentify(self) -> None:
        """``Reidentifiable``: one majority-acknowledged update of the genesis."""
        self._ready()
        if self._genesis is None:
            raise LedgerUnavailable("reidentify: this ledger read no genesis (it never proves)")
        query: dict[str, Any] = {"_id": self._genesis_key}
        if self._binary:  # nx-27017 matches no BinData: by _id alone there
            query["g"] = self._genesis
        update = {"q": query, "u": {"$set": {"g": Binary(os.urandom(GENESIS_BYTES))}}}
        command = {"update": self._collection, "updates": [update], "writeConcern": MAJORITY}
        if self._uuid is not None:
            command["collectionUUID"] = self._uuid
        try:
            reply = self._command(command)
        except Exception as exc:
            raise self._driver_failure("reidentify", exc) from exc
        errors.check_write_concern(reply, "reidentify")
        if reply.get("n") != 1 or reply.get("writeErrors"):
            raise self._forgot("the namespace's genesis document is gone or different")
        self._forgot("reidentify replaced it")

    def doctor_checks(self) -> list[Check]:
        """From the facts read at open (no I/O)."""
        assert self._facts is not None  # every open reads them
        durability = self._settings.durability
        return identity.doctor_checks(self._facts, self._info, durability, pymongo.version)

    def settings_checks(self) -> list[Check]:
        """``decision-ledger doctor`` before ``setup`` (``identity.settings_checks``)."""
        try:
            facts = self._read_facts(create=None)
        except LedgerError:
            raise
        except Exception as exc:
            raise errors.unavailable("read the server's settings", exc) from exc
        exists = bool(facts.collection)
        return identity.settings_checks(facts, self._settings.durability, pymongo.version, exists)

    def __enter__(self) -> MongoLedger:
        return self

    def close(self) -> None:
        """Close the client this ledger made (never a host's); every later call is refused."""
        if self._closed:
            return
        self._closed = True
        if not self._owned:
            return
        if not self._process.inherited():  # a parent's client: never closed in a child
            self._client.close()


def _key_bytes(value: Any) -> bytes | None:
    """A stored ``_id``'s key bytes (either encoding); ``None`` for anything else."""
    if isinstance(value, bytes):
        return bytes(value)
    if isinstance(value, str):
        try:
            return bytes.fromhex(value)
        except ValueError:
            return None
    return None


def of_collection(collection: Any, options: dict[str, Any]) -> dict[str, Any]:
    if "collection" in options:
        raise TypeError("from_collection takes the collection's own name")
    return {**options, "collection": collection.name}


def host_client(
    client: Any, database: str | None, options: dict[str, Any]
) -> tuple[str, Settings, str]:
    """A host's client: the database (its default unless named), our settings, and where
    it points, without any credential."""
    name = database or client.get_default_database("decision_ledger").name
    settings = client_settings(options)
    try:
        nodes = sorted(f"{h}:{p}" for h, p in client.topology_description.server_descriptions())
    except Exception:
        nodes = []
    where = f"mongodb://{','.join(nodes) or '?'}/{name}?collection={settings.collection}"
    return name, settings, where
