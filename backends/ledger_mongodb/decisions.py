"""Open, spend, is_spent and list, decided once as I/O-free step generators of
:mod:`.commands` requests; the sync and async shells only perform them (C9).

Identity after open (docs/mongodb.md, "Identity (C6)"): every operation proves its
namespace's genesis itself. A read fetches the genesis with the records in one ``find``,
the genesis last; a write is followed by that read before answering (a deleted genesis
never comes back); a listing page is followed by a genesis read. Where the server has a
collection UUID every command carries it (``collectionUUID``), so a re-created collection
fails the very command. Options and indexes are re-checked every ``recheck`` seconds.
Once the store is found changed, the ledger stays failed closed.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from bson.binary import Binary

from ledger_core import notices
from ledger_core.errors import (
    AmbiguousSpend,
    LedgerError,
    LedgerUnavailable,
    UnsafeStoreConfig,
    missing_namespace,
    missing_store,
)
from ledger_core.guard import Guard
from ledger_core.ids import is_marker, validate_request_id
from ledger_core.protocol import LedgerInfo
from ledger_core.tokens import new_token

from . import commands as cmd
from . import errors
from .commands import Request
from .identity import Facts, ledger_info
from .options import Settings

Steps = Generator[Request, Any, Any]
Page = Callable[["Store", Any, float], Steps]  # a listing's page: (items, where next)
GENESIS_BYTES = 16
LIST_PAGE = 1000


@dataclass
class Store:
    """What an open ledger knows about its store; shared by its operations."""

    settings: Settings
    info: LedgerInfo
    uuid: Any
    genesis_key: str
    genesis: bytes | None
    encoding: str
    shape: tuple[Any, ...]
    guard: Guard  # failed for good, and when the options are next re-checked
    closed: bool = False  # the ledger was closed: its shell refuses every call
    facts: Facts | None = None  # what opening read (the doctor shows it)

    @property
    def namespace(self) -> str:
        return self.settings.namespace

    @property
    def collection(self) -> str:
        return self.settings.collection


def _first_batch(reply: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    cursor = reply.get("cursor") or {}
    return list(cursor.get("firstBatch") or [])


def _listed(collection: str) -> Generator[Request, Any, list[Mapping[str, Any]]]:
    """``collection``'s listCollections entry, or none: matched by name again, since
    nx-27017 ignores listCollections' filter and lists every collection."""
    listed = _first_batch((yield cmd.list_collection(collection)))
    return [c for c in listed if c.get("name") == collection]


def _collection_steps(settings: Settings, create: bool) -> Steps:
    """The collection's listCollections entry; created (simple collation) when asked."""
    for attempt in range(2):
        found = yield from _listed(settings.collection)
        if found:
            return found[0]
        if not create or attempt:
            break
        try:
            yield cmd.create(settings.collection)
        except Exception as exc:
            if errors.code_of(exc) != errors.NAMESPACE_EXISTS:  # another opener made it
                raise errors.unavailable("create collection", exc) from exc
    raise missing_store(f"MongoDB collection {settings.collection!r}")


def _optional(request: Request) -> Steps:
    """A command that may be refused for lack of privileges: ``None`` then."""
    try:
        reply = yield request
    except Exception as exc:
        if errors.classify(exc) is errors.Outcome.REJECTED:
            return None
        raise
    return reply


class NotPrimary(UnsafeStoreConfig):
    """The server answering is not a writable primary (a direct connection to a member
    that is, or became, a secondary): nothing may be spent or read there."""


def facts_steps(settings: Settings, create: bool) -> Steps:
    hello = yield cmd.admin("hello")
    if not hello.get("isWritablePrimary", hello.get("ismaster")):
        raise NotPrimary(
            "the MongoDB server is not a writable primary: spends and reads must go to the "
            "primary (connect to the replica set, not directly to one member)"
        )
    build = yield cmd.admin("buildInfo")
    status = yield from _optional(cmd.admin("serverStatus", repl=0, metrics=0, locks=0))
    repl = None
    if hello.get("setName"):
        answer = yield from _optional(cmd.admin("replSetGetConfig"))
        repl = None if answer is None else answer.get("config")
    collection = yield from _collection_steps(settings, create)
    indexes = _first_batch((yield cmd.list_indexes(settings.collection)))
    return Facts(hello, build, status, repl, collection, indexes)


def _probe_steps(settings: Settings) -> Steps:
    """Whether the server finds a BinData ``_id`` by equality (nx-27017 does not): then
    ids are BinData, else lowercase hex text."""
    probe = cmd.probe_key(settings.namespace)
    doc: Any = {"_id": probe, "ns": settings.namespace}
    _unless_duplicate((yield cmd.insert_doc(settings.collection, doc, "probe")), "key probe")
    found = _first_batch((yield cmd.find_one(settings.collection, probe, None, "probe")))
    return cmd.BIN if found and cmd.key_bytes(found[0]["_id"]) == bytes(probe) else cmd.HEX


def _unless_duplicate(reply: Mapping[str, Any], what: str) -> None:
    """An insert whose document is there now (ours, or a racing opener's)."""
    codes = {e.get("code") for e in reply.get("writeErrors") or []}
    if codes - {errors.DUPLICATE_KEY}:
        raise LedgerUnavailable(f"MongoDB refused the {what}: {sorted(codes)}")


def _genesis_steps(settings: Settings, key: str, uuid: Any, create: bool, location: str) -> Steps:
    """The namespace's genesis (value, key encoding): read, or written once (racing
    openers agree: the first insert wins, the others read it)."""
    for attempt in range(2):
        found = _first_batch((yield cmd.find_one(settings.collection, key, uuid, "genesis")))
        if found:
            return bytes(found[0]["g"]), str(found[0].get("enc", cmd.BIN))
        if not create or attempt:
            return None, cmd.BIN
        encoding = yield from _probe_steps(settings)
        doc = cmd.genesis_doc(settings.namespace, os.urandom(GENESIS_BYTES), encoding)
        reply = yield cmd.insert_doc(settings.collection, doc, "genesis")
        _raise_write_concern(reply, "genesis")
        _unless_duplicate(reply, "genesis document")
        if reply.get("n") == 1:  # ours, not a racing opener's
            notices.created(location, settings.namespace)
    return None, cmd.BIN


def open_steps(settings: Settings, database: str, location: str, now: float) -> Steps:
    """Read the server's facts and the namespace's identity, once (C6)."""
    try:
        facts: Facts = yield from facts_steps(settings, settings.create)
        key = cmd.genesis_key(settings.namespace)
        genesis, encoding = yield from _genesis_steps(
            settings, key, facts.guard_uuid, settings.create, location
        )
    except LedgerError:
        raise
    except Exception as exc:
        raise errors.unavailable("open", exc) from exc
    if genesis is None and not settings.create:
        where = f"(its genesis document) in MongoDB collection {settings.collection!r}"
        raise missing_namespace(settings.namespace, where)
    info = ledger_info(
        facts,
        location=location,
        namespace=settings.namespace,
        genesis=genesis,
        database=database,
        durability=settings.durability,
    )
    return Store(
        settings=settings,
        info=info,
        uuid=facts.guard_uuid,
        genesis_key=key,
        genesis=genesis,
        encoding=encoding,
        shape=facts.shape(settings.durability),
        guard=Guard(settings.recheck, now),
        facts=facts,
    )


def _forgot(store: Store, why: str) -> LedgerError:
    return store.guard.fail(
        UnsafeStoreConfig(
            f"the store forgot or its identity changed since this ledger opened ({why}); "
            "reopen the ledger"
        )
    )


def _driver_failure(store: Store, what: str, exc: Exception) -> LedgerError:
    return _dropped(store, errors.code_of(exc)) or errors.unavailable(what, exc)


def reidentify_steps(store: Store) -> Steps:
    """A fresh genesis in place of the one this ledger opened (one majority-acknowledged
    update): every instance, this one included, then fails closed (C6, after a restore)."""
    store.guard.check()
    if store.genesis is None:
        raise LedgerUnavailable("reidentify: this ledger read no genesis (it never proves)")
    old = store.genesis if store.encoding == cmd.BIN else None  # nx-27017: by _id alone
    fresh = os.urandom(GENESIS_BYTES)
    try:
        reply = yield cmd.set_genesis(store.collection, store.genesis_key, old, fresh, store.uuid)
    except LedgerError:
        raise
    except Exception as exc:
        raise _driver_failure(store, "reidentify", exc) from exc
    _raise_write_concern(reply, "reidentify")
    if reply.get("n") != 1 or reply.get("writeErrors"):
        raise _forgot(store, "the namespace's genesis document is gone or different")
    _forgot(store, "reidentify replaced it")


def recheck_steps(store: Store, now: float) -> Steps:
    """Refuse if failed for good; when due, re-read what decides durability (options,
    indexes, the server) and fail closed on any change. One operation re-checks while the
    others go on; a re-check that could not reach the store is due again at once."""
    store.guard.check()
    if not store.guard.due(now):
        return
    try:
        facts: Facts = yield from facts_steps(store.settings, False)
    except NotPrimary:
        store.guard.again()  # not a change of store: refused until a primary answers
        raise
    except LedgerError as exc:
        raise _forgot(store, f"re-check: {exc}") from exc
    except Exception as exc:
        store.guard.again()
        raise _driver_failure(store, "re-check", exc) from exc
    if facts.shape(store.settings.durability) != store.shape:
        raise _forgot(store, "the collection's UUID or options changed")


def _raise_write_concern(reply: Mapping[str, Any], what: str) -> None:
    wce = reply.get("writeConcernError")
    if wce:
        raise LedgerUnavailable(f"MongoDB {what}: write concern failed ({wce.get('code')})")


def _binary(doc: Mapping[str, Any] | None, name: str) -> bytes | None:
    value = None if doc is None else doc.get(name)
    return bytes(value) if isinstance(value, bytes) else None


@dataclass(frozen=True)
class _Read:
    token: bytes | None  # the record's token, or None when absent
    present: bool
    digest: bytes | None = None  # the attempt key's digest of a spend_as record (C10)

    def holds(self, token: bytes, digest: bytes | None) -> bool:
        """Whether the record is this call's (its token) or, for ``spend_as``, the same
        attempt key's (its digest)."""
        return self.token == token or (digest is not None and self.digest == digest)


def _read_many_steps(store: Store, keys: list[Any], what: str) -> Steps:
    """The records among ``keys`` (by key bytes) and the genesis in one ``find``; the
    genesis must be ours."""
    try:
        reply = yield cmd.read_many(
            store.collection, keys, store.genesis_key, store.uuid, what, store.encoding
        )
    except Exception as exc:
        raise _driver_failure(store, what, exc) from exc
    genesis = None
    records: dict[Any, _Read] = {}
    for doc in _first_batch(reply):
        if cmd.same_key(doc["_id"], store.genesis_key):
            genesis = doc
        else:
            found = _Read(_binary(doc, "t"), True, cmd.key_bytes(doc.get("d")))
            records[cmd.key_bytes(doc["_id"])] = found
    if store.genesis is not None and (genesis is None or _binary(genesis, "g") != store.genesis):
        raise _forgot(store, "the namespace's genesis document is gone or different")
    return {key: records.get(cmd.key_bytes(key), _ABSENT) for key in keys}


_ABSENT = _Read(None, False)


def is_spent_steps(store: Store, request_id: bytes, now: float) -> Steps:
    yield from recheck_steps(store, now)
    key = cmd.record_key(store.namespace, request_id, store.encoding)
    return (yield from _read_many_steps(store, [key], "read"))[key].present


def is_spent_many_steps(store: Store, request_ids: Sequence[bytes], now: float) -> Steps:
    """A batch read: one ``find`` of the records and the genesis."""
    yield from recheck_steps(store, now)
    keys = [cmd.record_key(store.namespace, rid, store.encoding) for rid in request_ids]
    found = yield from _read_many_steps(store, list(dict.fromkeys(keys)), "is_spent_many")
    return [found[key].present for key in keys]


def _dropped(store: Store, code: Any) -> LedgerError | None:
    """A write error saying the collection is not the one opened: fail closed for good."""
    if code in errors.FORGOT_CODES and store.uuid is not None:
        return _forgot(store, f"collection {store.collection!r} was dropped or replaced")
    return None


def _outcome(store: Store, reply: Mapping[str, Any], what: str) -> bool | None:
    """A spend's insert or spend_as's upsert: ``True`` recorded (or matched our digest),
    ``False`` a duplicate key, ``None`` unknown (the write concern failed)."""
    write_errors: Sequence[Mapping[str, Any]] = reply.get("writeErrors") or []
    if write_errors:
        code = write_errors[0].get("code")
        if code == errors.DUPLICATE_KEY:
            return False
        raise _dropped(store, code) or LedgerUnavailable(
            f"MongoDB refused the {what} (code {code})"
        )
    if reply.get("writeConcernError"):
        return None
    if reply.get("upserted") or reply.get("n") == 1:
        return True
    if what == "spend_as":
        return None
    raise LedgerUnavailable(f"MongoDB {what}: unexpected reply n={reply.get('n')!r}")


def spend_steps(
    store: Store, request_id: bytes, token: bytes, now: float, digest: bytes | None = None
) -> Steps:
    """One insert of ``{_id, t: token}`` (w majority, journaled), or with ``digest`` C10's
    one upsert (:func:`commands.spend_as`); then the proof, a lost reply settled."""
    yield from recheck_steps(store, now)
    key = cmd.record_key(store.namespace, request_id, store.encoding)
    if digest is None:
        request = cmd.insert(store.collection, [key], token, store.namespace, store.uuid, "spend")
    else:
        stored = cmd.encoded(digest, store.encoding)
        request = cmd.spend_as(store.collection, key, token, stored, store.namespace, store.uuid)
    return (yield from _write_steps(store, request, key, token, digest))


def _write_steps(
    store: Store, request: Request, key: Any, token: bytes, digest: bytes | None
) -> Steps:
    """The one write that records an id, then the genesis and the record read back before
    the answer (the proof); a lost reply is settled (C5)."""
    what = request.what
    outcome, failure = yield from _sent(store, request, lambda r: _outcome(store, r, what))
    if outcome is None:  # unknown: the read decides (a duplicate may be our own write)
        read = (yield from _read_back(store, [key], failure, what))[key]
        return read.holds(token, digest)
    read = (yield from _read_many_steps(store, [key], f"{what} (verify)"))[key]
    if not read.present:
        raise _forgot(store, "the record vanished right after its write")
    return outcome and read.holds(token, digest)


def _sent(store: Store, request: Request, judge: Callable[[Any], Any]) -> Steps:
    """``(judge(reply), None)``, or, when the write's outcome is unknown, the same write
    sent again (C5) and ``(None, failure)``: a read then decides. A refusal raises; a
    resend that gets no answer (or finds the store forgot) leaves it ambiguous."""
    try:
        return judge((yield request)), None
    except LedgerError:
        raise
    except Exception as exc:
        failure = exc
    if errors.classify(failure) is not errors.Outcome.UNKNOWN or (
        errors.code_of(failure) in errors.FORGOT_CODES
    ):
        raise _driver_failure(store, request.what, failure) from failure
    try:
        judge((yield replace(request, what=f"{request.what} (resolve)")))
    except UnsafeStoreConfig:
        raise
    except Exception as exc:
        dropped = _dropped(store, errors.code_of(exc))
        if dropped is not None:
            raise dropped from exc
        raise errors.ambiguous(failure, exc) from failure
    return None, failure


def _read_back(store: Store, keys: list[Any], failure: Exception | None, what: str) -> Steps:
    """The records after a write whose outcome is unknown, with the genesis; every one
    must be on the primary, or the outcome stays unknown."""
    try:
        found: dict[Any, _Read] = yield from _read_many_steps(store, keys, f"{what} (resolve)")
    except UnsafeStoreConfig:
        raise
    except LedgerError as exc:
        raise errors.ambiguous(failure or exc, exc) from (failure or exc)
    if not all(read.present for read in found.values()):
        raise errors.ambiguous(
            failure or LedgerUnavailable("write concern not confirmed"),
            LedgerUnavailable("a record written is not on the primary"),
        )
    return found


BATCH = 1000  # records per insert (and keys per read) of a batch


def batches(store: Store, request_ids: Sequence[str], *, spend: bool) -> Iterator[Steps]:
    """The steps of each batch of ``request_ids`` (a spend: a fresh token per batch)."""
    raws = [validate_request_id(r) for r in request_ids]
    for i in range(0, len(raws), BATCH):
        batch, now = raws[i : i + BATCH], time.monotonic()
        if spend:
            yield spend_many_steps(store, batch, new_token(), now)
        else:
            yield is_spent_many_steps(store, batch, now)


def _many_outcome(store: Store, reply: Mapping[str, Any], count: int) -> list[bool] | None:
    """Per document of an unordered insert: inserted, or a duplicate; ``None`` when the
    write concern failed."""
    won = [True] * count
    for error in reply.get("writeErrors") or []:
        code = error.get("code")
        if code != errors.DUPLICATE_KEY:
            raise _dropped(store, code) or AmbiguousSpend(
                f"MongoDB refused part of a spend_many batch (code {code}); the other ids "
                "of the batch may be recorded (treat them as spent)"
            )
        won[int(error.get("index", -1))] = False
    if reply.get("writeConcernError"):
        return None
    if reply.get("n") != won.count(True):
        raise AmbiguousSpend(f"MongoDB spend_many: unexpected reply n={reply.get('n')!r}")
    return won


def spend_many_steps(store: Store, request_ids: Sequence[bytes], token: bytes, now: float) -> Steps:
    """One unordered insert of the batch: each id's answer is what ``spend`` would say (a
    repeat within the batch: ``False``), settled and proven with one read of the tokens."""
    yield from recheck_steps(store, now)
    keys = [cmd.record_key(store.namespace, rid, store.encoding) for rid in request_ids]
    unique = list(dict.fromkeys(keys))
    request = cmd.insert(store.collection, unique, token, store.namespace, store.uuid, "spend_many")
    # Unknown (None): a duplicate now may be our own first write; the read decides.
    won, failure = yield from _sent(store, request, lambda r: _many_outcome(store, r, len(unique)))
    found = yield from _read_back(store, unique, failure, "spend_many")  # the proof, tokens
    mine = [found[key].token == token for key in unique]
    won = mine if won is None else [a and b for a, b in zip(won, mine, strict=True)]
    answer = dict(zip(unique, won, strict=True))
    return [answer.pop(key, False) for key in keys]  # a repeat: its first copy answered


def _page(store: Store, request: Request) -> Steps:
    """One listing page's documents, then a read of the genesis (the proof)."""
    try:
        reply = yield request
    except Exception as exc:
        raise _driver_failure(store, request.what, exc) from exc
    yield from _read_many_steps(store, [], f"{request.what} (verify)")
    return _first_batch(reply)


def namespace_steps(store: Store, after: Any, now: float) -> Steps:
    """One page of the collection's namespaces: its genesis documents."""
    yield from recheck_steps(store, now)
    first = cmd.GENESIS_PREFIX if after is None else after
    docs = yield from _page(store, cmd.genesis_page(store.collection, first, LIST_PAGE, store.uuid))
    names = [
        doc["_id"][len(cmd.GENESIS_PREFIX) :]
        for doc in docs
        if isinstance(doc["_id"], str) and doc["_id"].startswith(cmd.GENESIS_PREFIX)
    ]
    return names, (docs[-1]["_id"] if len(docs) == LIST_PAGE else None)


def list_steps(store: Store, after: Any, now: float) -> Steps:
    """One page of the namespace's spent ids (markers and the genesis skipped)."""
    yield from recheck_steps(store, now)
    first = cmd.encoded(b"", store.encoding) if after is None else after
    request = cmd.list_page(store.collection, store.namespace, first, LIST_PAGE, store.uuid)
    docs = yield from _page(store, request)
    prefix = cmd.record_prefix(store.namespace)
    ids: list[str] = []
    for doc in docs:
        raw = cmd.key_bytes(doc["_id"])
        if raw is not None and raw.startswith(prefix) and not is_marker(raw[len(prefix) :]):
            ids.append(raw[len(prefix) :].decode("utf-8"))
    last = docs[-1]["_id"] if len(docs) == LIST_PAGE else None
    return ids, (Binary(last) if isinstance(last, bytes) else last)
