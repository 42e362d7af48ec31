"""Identity (C6) and safety: facts read from the server -> ``LedgerInfo``, no I/O.

``store_id`` = deployment + the collection's UUID (where real) + the namespace's random
genesis + namespace: a re-created collection is a new store. No ``store_id`` (with the
reason) when the store can forget an acknowledged spend or compare ids loosely.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bson.binary import UUID_SUBTYPE, Binary

from ledger_core.doctor import Check, Fact, parse_version, report, topics, version_fact
from ledger_core.protocol import Durability, LedgerInfo

NX_PROCESS = "nx_27017"


@dataclass(frozen=True)
class Facts:
    """What the server said about itself and the collection."""

    hello: Mapping[str, Any]
    build: Mapping[str, Any]
    status: Mapping[str, Any] | None  # None: serverStatus not permitted
    repl: Mapping[str, Any] | None  # replSetGetConfig's "config", when a replica set
    collection: Mapping[str, Any]  # the listCollections entry
    indexes: Sequence[Mapping[str, Any]]

    @property
    def uuid(self) -> Any:
        """The collection UUID (BSON binary subtype 4) to send back with every command, or
        ``None`` when the server gives none, all zeros, or text (nx-27017 does)."""
        value = (self.collection.get("info") or {}).get("uuid")
        if not isinstance(value, Binary) or value.subtype != UUID_SUBTYPE:
            return None
        return None if bytes(value) == bytes(16) else value

    @property
    def version(self) -> tuple[int, ...]:
        return parse_version(str(self.build.get("version", "0")))[:2]

    @property
    def guard_uuid(self) -> Any:
        """The UUID to send as ``collectionUUID`` (MongoDB >= 6.0; older servers refuse
        the field, and the genesis read alone proves the store there)."""
        return self.uuid if self.version >= (6, 0) else None

    @property
    def uuid_text(self) -> str:
        value = self.uuid
        return "none" if value is None else str(value.as_uuid())

    @property
    def kind(self) -> str:
        if self.build.get("process") == NX_PROCESS:
            return "nx-27017"
        if self.hello.get("msg") == "isdbgrid":
            return "mongos"
        if self.hello.get("setName"):
            return "replica-set"
        return "standalone"

    @property
    def deployment(self) -> str:
        if self.kind == "replica-set":
            settings = (self.repl or {}).get("settings") or {}
            return f"rs:{self.hello.get('setName')}:{settings.get('replicaSetId', '?')}"
        return self.kind

    def shape(self, durability: str) -> tuple[Any, ...]:
        """What a re-check compares: the collection's identity and its options."""
        options = self.collection.get("options") or {}
        return (self.uuid_text, repr(sorted(options.items())), self.verdict(durability))

    def verdict(self, durability: str = Durability.MACHINE) -> str | None:
        """Why this store must never prove, or ``None``."""
        found = self.refusals(durability)
        return found[0][1] if found else None

    def refusals(self, durability: str = Durability.MACHINE) -> list[tuple[str, str]]:
        """Every reason this store must never prove, each with the fact it is about."""
        options: Mapping[str, Any] = self.collection.get("options") or {}
        kind = self.collection.get("type", "collection")
        locale = (options.get("collation") or {}).get("locale", "simple")
        ttl = [i.get("name") for i in self.indexes if "expireAfterSeconds" in i]
        nx = self.kind == "nx-27017"
        engine = (self.status or {}).get("storageEngine") or {}
        repl = self.repl or {}
        rules = [
            (self.kind == "mongos", "deployment", "a sharded cluster (mongos): _id is unique "
             "per shard only unless _id is the shard key, which this ledger does not verify"),
            (kind != "collection", "collection",
             f"the ledger's namespace is a {kind}, not a collection"),
            (options.get("capped"), "collection",
             "the collection is capped: MongoDB deletes the oldest documents"),
            ("expireAfterSeconds" in options, "collection",
             "the collection expires documents (expireAfterSeconds)"),
            ("timeseries" in options, "collection", "the collection is a time series collection"),
            (locale != "simple", "collection", f"the collection's collation is {locale!r}, not "
             "simple: ids could compare loosely (e.g. case-insensitively)"),
            (ttl, "collection", f"index {ttl[:1] and ttl[0]!r} is a TTL index: documents expire"),
            (nx and durability != Durability.PROCESS, "journal",
             "nx-27017 cannot promise that a journaled write survives a power loss: it turns "
             "j:true into PRAGMA synchronous=FULL on a SQLite connection shared by every client "
             "of the database (a concurrent w:1 writer sets NORMAL), and it reports neither its "
             "journal mode nor that level (open with durability=process to accept a "
             "server-process crash as the bound)"),
            (not nx and self.status is None, "storage engine",
             "serverStatus is not permitted (grant clusterMonitor): storage engine unknown"),
            (not nx and self.status is not None and not engine, "storage engine",
             "the server reports no storage engine"),
            (not nx and bool(engine) and (engine.get("name") == "inMemory"
             or engine.get("persistent") is False), "storage engine",
             f"the storage engine {engine.get('name')!r} does not persist"),
            (not nx and self.kind == "replica-set" and self.repl is None, "journal",
             "replSetGetConfig is not permitted (grant clusterMonitor): "
             "writeConcernMajorityJournalDefault unknown"),
            (not nx and repl.get("writeConcernMajorityJournalDefault") is False
             and self.kind == "replica-set", "journal",
             "writeConcernMajorityJournalDefault is false: a majority write may be "
             "acknowledged before it is journaled on a majority"),
        ]  # fmt: skip
        return [(fact, why) for when, fact, why in rules if when]


def durability_of(facts: Facts) -> str:
    """What a proof claims: a machine crash, but a server process's on nx-27017."""
    return Durability.PROCESS if facts.kind == "nx-27017" else Durability.MACHINE


def ledger_info(
    facts: Facts,
    *,
    location: str,
    namespace: str,
    genesis: bytes | None,
    database: str,
    durability: str = Durability.MACHINE,
) -> LedgerInfo:
    reason = facts.verdict(durability)
    identity = f"{facts.deployment}/{database}/uuid={facts.uuid_text}"
    if reason is None and genesis is None:
        reason = "the namespace has no genesis document (open with create=true or run setup)"
    proof = None
    if reason is None and genesis is not None:
        proof = f"mongodb:{identity}/genesis={genesis.hex()}/ns={namespace}"
    return LedgerInfo(
        backend="mongodb",
        store_id=proof,
        reason=reason,
        location=location,
        namespace=namespace,
        identity=identity,
        durability=Durability.NONE if proof is None else durability_of(facts),
    )


# The oldest server a ledger opens on: every open sends ``hello`` (MongoDB 4.4.2, and
# 4.0.21 / 4.2.10 patch releases). Every operation proves the genesis; collectionUUID
# (6.0) is sent too where present.
MONGODB_MINIMUM = (4, 0)
GUARD_UUID_FROM = (6, 0)


def _fact_lines(facts: Facts, exists: bool = True) -> list[tuple[str, str]]:
    """What the doctor says of each fact :meth:`Facts.refusals` judges, when it passes
    (``exists``: the collection is there; else what ``setup`` would create)."""
    options = facts.collection.get("options") or {}
    collation = (options.get("collation") or {}).get("locale", "simple")
    engine = (facts.status or {}).get("storageEngine") or {}
    made = "a plain collection, collation simple, no TTL index"
    lines = [
        ("deployment", f"deployment {facts.deployment}"),
        (
            "collection",
            f"a plain collection, collation {collation}, no TTL index"
            if exists
            else f"no collection yet: setup creates {made}",
        ),
    ]
    if facts.kind == "nx-27017":
        lines.append(
            ("journal", "nx-27017: power-loss durability accepted with durability=process")
        )
        return lines
    lines.append(("storage engine", f"storage engine {engine.get('name', '?')} (persistent)"))
    if facts.kind == "replica-set":
        lines.append(("journal", "writeConcernMajorityJournalDefault true"))
    return lines


def _lines(facts: Facts, durability: str, driver: str, exists: bool) -> tuple[Fact, list[Fact]]:
    """The ``versions`` line and the configuration lines, judged as an open judges them."""
    said = facts.build.get("version")
    needs = "the hello command every open sends"
    if facts.guard_uuid is not None:
        needs += "; collectionUUID (6.0) keeps each command out of a re-created collection"
    elif said and facts.version >= GUARD_UUID_FROM:
        needs += "; it gives no collection UUID: the genesis read alone guards each spend"
    elif said:
        needs += "; below 6.0 no collectionUUID: the genesis read alone guards each spend"
    version = version_fact(
        "MongoDB" if facts.kind != "nx-27017" else "nx-27017",
        facts.version if said else None,
        MONGODB_MINIMUM,
        needs,
        f"pymongo {driver}",
        shown=str(said or ""),
    )
    concern = "write concern w: majority, j: true on every write (sent with each command)"
    lines = [
        Fact(concern),
        *topics(_fact_lines(facts, exists), facts.refusals(durability), "docs/mongodb.md"),
    ]
    if facts.kind == "nx-27017":
        lines.append(Fact("nx-27017 reports no storage engine", None))
    return version, lines


def doctor_checks(facts: Facts, info: LedgerInfo, durability: str, driver: str) -> list[Check]:
    """The doctor's lines, from the facts read at open; no I/O."""
    return report(info, *_lines(facts, durability, driver, True))


def settings_checks(facts: Facts, durability: str, driver: str, exists: bool) -> list[Check]:
    """The server's settings alone, as the doctor judges them for a ledger: for a store
    not set up yet (no genesis, so no identity to judge; ``exists``: the collection)."""
    version, lines = _lines(facts, durability, driver, exists)
    return [version.check(), *(line.check() for line in lines)]
