"""The store's requests, built without I/O: each one database command
(``Database.command``), the same for ``MongoClient``, ``AsyncMongoClient`` and Motor.

Keys (C7/C8): a record's ``_id`` is ``ledger_key(namespace, id)`` as exact bytes: BSON
``BinData`` where the server finds BinData by equality (MongoDB), else the same bytes as
lowercase hex text (nx-27017, whose equality match on BinData finds nothing). The
encoding is probed once when the namespace's genesis is written, and recorded in it, so
every instance keys alike. The genesis ``_id`` is the text ``"genesis\0" + namespace``:
never hex, never BinData, so no id can name it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bson.binary import Binary
from bson.son import SON

from ledger_core.ids import ledger_key

GENESIS_PREFIX = "genesis\x00"
GENESIS_END = "genesis\x01"  # every genesis _id sorts between the prefix and this
PROBE_PREFIX = b"probe\x00"
MAJORITY = {"w": "majority", "j": True}
READ_MAJORITY = {"level": "majority"}
BIN, HEX = "bin", "hex"


@dataclass(frozen=True)
class Request:
    """One database command; ``admin`` runs it on the ``admin`` database."""

    command: SON[str, Any] = field(repr=False)
    what: str
    admin: bool = False


def encoded(raw: bytes, encoding: str) -> Any:
    """Key bytes or a digest as stored: BinData, or hex text where the server matches no
    BinData by equality (nx-27017)."""
    return Binary(raw) if encoding == BIN else raw.hex()


def record_key(namespace: str, request_id: bytes, encoding: str) -> Any:
    return encoded(ledger_key(namespace, request_id), encoding)


def record_prefix(namespace: str) -> bytes:
    return ledger_key(namespace, b"")


def key_bytes(value: Any) -> bytes | None:
    """The stored ``_id``'s key bytes (either encoding); ``None`` for anything else."""
    if isinstance(value, bytes):  # BinData subtype 0 decodes to bytes
        return bytes(value)
    if isinstance(value, str):
        try:
            return bytes.fromhex(value)
        except ValueError:
            return None
    return None


def same_key(stored: Any, key: Any) -> bool:
    """Whether a stored ``_id`` is ``key`` (BinData decodes to ``bytes``; type-exact)."""
    if isinstance(key, bytes):
        return isinstance(stored, bytes) and bytes(stored) == bytes(key)
    return isinstance(stored, str) and stored == key


def genesis_key(namespace: str) -> str:
    return GENESIS_PREFIX + namespace


def probe_key(namespace: str) -> Binary:
    probe: Binary = Binary(PROBE_PREFIX + namespace.encode("utf-8"))
    return probe


def _with_uuid(cmd: SON[str, Any], uuid: Any) -> SON[str, Any]:
    # MongoDB >= 6.0 refuses the command (CollectionUUIDMismatch) when the collection
    # by this name is not the one we opened: a dropped and re-created collection is
    # noticed in the same round trip, before anything is written or read.
    if uuid is not None:
        cmd["collectionUUID"] = uuid
    return cmd


def write(fields: list[tuple[str, Any]], what: str, uuid: Any = None) -> Request:
    """A write, acknowledged only once a majority journaled it (what a proof claims)."""
    return Request(_with_uuid(SON([*fields, ("writeConcern", MAJORITY)]), uuid), what)


def insert(
    collection: str, keys: list[Any], token: bytes, namespace: str, uuid: Any, what: str
) -> Request:
    """Records in one unordered ``insert`` (one token for all): each document succeeds or
    meets its own duplicate key, whatever the others do."""
    docs = [SON([("_id", key), ("t", Binary(token)), ("ns", namespace)]) for key in keys]
    return write([("insert", collection), ("documents", docs), ("ordered", False)], what, uuid)


def spend_as(
    collection: str, key: Any, token: bytes, digest: Any, namespace: str, uuid: Any
) -> Request:
    """C10 in one upsert on the record's ``_id``, namespace and digest: no record, it is
    inserted (the token ``$setOnInsert``); one with this digest is matched, unchanged;
    any other record makes the insert fail on its ``_id`` (duplicate key)."""
    query = SON([("_id", key), ("ns", namespace), ("d", digest)])
    update = SON([("q", query), ("u", {"$setOnInsert": {"t": Binary(token)}}), ("upsert", True)])
    fields = [("update", collection), ("updates", [update]), ("ordered", True)]
    return write(fields, "spend_as", uuid)


def read_many(
    collection: str, keys: list[Any], genesis: str, uuid: Any, what: str, encoding: str
) -> Request:
    """The records among ``keys`` and the genesis in one read, the genesis last (a query
    may resume on a newer snapshot between documents: a genesis still there after the
    records proves where they were read). BSON sorts text before BinData, hex digits
    before the genesis's ``g``."""
    flt = {"_id": {"$in": [*keys, genesis]}}
    last = -1 if encoding == BIN else 1
    return _find(collection, flt, {"t": 1, "g": 1, "d": 1}, len(keys) + 1, uuid, what, last)


def genesis_page(collection: str, after: str, size: int, uuid: Any) -> Request:
    """One page of the genesis documents after ``after`` (the ``_id`` index only)."""
    flt = {"_id": {"$gt": after, "$lt": GENESIS_END}}
    return _find(collection, flt, {"_id": 1}, size, uuid, "namespaces", 1)


def _find(
    collection: str,
    flt: dict[str, Any],
    projection: dict[str, Any],
    size: int,
    uuid: Any,
    what: str,
    order: int,
) -> Request:
    """One single-batch ``find``, read concern majority, in ``_id`` order ``order``."""
    cmd: SON[str, Any] = SON([("find", collection), ("filter", flt), ("projection", projection)])
    cmd.update(sort={"_id": order}, limit=size, batchSize=size, singleBatch=True)
    cmd["readConcern"] = READ_MAJORITY
    return Request(_with_uuid(cmd, uuid), what)


def find_one(collection: str, key: Any, uuid: Any, what: str) -> Request:
    return _find(collection, {"_id": key}, {}, 1, uuid, what, 1)


def insert_doc(collection: str, doc: SON[str, Any], what: str) -> Request:
    return write([("insert", collection), ("documents", [doc])], what)


def genesis_doc(namespace: str, value: bytes, encoding: str) -> SON[str, Any]:
    fields = [("_id", genesis_key(namespace)), ("g", Binary(value)), ("ns", namespace)]
    return SON([*fields, ("enc", encoding)])


def set_genesis(collection: str, key: str, old: bytes | None, value: bytes, uuid: Any) -> Request:
    """A fresh genesis ``value`` (``reidentify``) in the namespace's genesis document,
    matched on the ``old`` value too where the server matches BinData (``None``: not)."""
    query = SON([("_id", key)]) if old is None else SON([("_id", key), ("g", Binary(old))])
    update = SON([("q", query), ("u", {"$set": {"g": Binary(value)}})])
    fields = [("update", collection), ("updates", [update]), ("ordered", True)]
    return write(fields, "reidentify", uuid)


def list_page(collection: str, namespace: str, after: Any, size: int, uuid: Any) -> Request:
    """One page of a namespace's documents in ``_id`` order (migration source)."""
    # ``after`` has the keys' BSON type (first: the smallest value of it): comparisons
    # bracket by type, so documents of the other encoding never show up.
    flt: dict[str, Any] = {"ns": namespace, "_id": {"$gt": after}}
    return _find(collection, flt, {"_id": 1}, size, uuid, "spent_ids", 1)


def admin(command: str, **fields: int) -> Request:
    """A command on the ``admin`` database (``hello``, ``buildInfo``...)."""
    return Request(SON([(command, 1), *fields.items()]), command, admin=True)


def list_collection(collection: str) -> Request:
    return Request(
        SON([("listCollections", 1), ("filter", {"name": collection})]), "listCollections"
    )


def list_indexes(collection: str) -> Request:
    return Request(SON([("listIndexes", collection)]), "listIndexes")


def create(collection: str) -> Request:
    """The collection, with the simple (binary) collation: ids compare exactly (C8)."""
    return write([("create", collection), ("collation", {"locale": "simple"})], "create")
