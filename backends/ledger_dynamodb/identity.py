"""Facts read from DynamoDB -> :class:`LedgerInfo`: identity, durability, refusals. No I/O.

``store_id`` is derived from the table's own identity (a re-created or restored table gets
a new one), the namespace's random genesis value and the namespace."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from ledger_core.doctor import Check, Fact, parse_version, report, topics, version_fact
from ledger_core.errors import LedgerError, LedgerUnavailable, UnsafeStoreConfig
from ledger_core.protocol import Durability, LedgerInfo

from .items import GENESIS, KEY, OUR_ATTRIBUTES, binary
from .options import Settings, is_aws_endpoint

GENESIS_BYTES = 16
USABLE_STATUS = frozenset({"ACTIVE", "UPDATING"})
MOTO_SERVER = "werkzeug"  # moto's server mode answers with Werkzeug's Server header
MOTO_ACCOUNT = "123456789012"  # moto's default account id


@dataclass(frozen=True)
class TableFacts:
    """What ``DescribeTable`` and ``DescribeTimeToLive`` say, reduced to what we judge."""

    name: str
    table_id: str
    arn: str
    created: str
    status: str
    key_ok: bool
    ttl_status: str
    ttl_attribute: str
    replicas: tuple[str, ...]
    multi_region: str
    server: str = ""

    @classmethod
    def read(cls, table: dict[str, Any], ttl: dict[str, Any], server: str = "") -> TableFacts:
        keys = table.get("KeySchema") or []
        types = {
            d.get("AttributeName"): d.get("AttributeType")
            for d in table.get("AttributeDefinitions") or []
        }
        key_ok = (
            len(keys) == 1
            and keys[0].get("AttributeName") == KEY
            and keys[0].get("KeyType") == "HASH"
            and types.get(KEY) == "B"
        )
        created = table.get("CreationDateTime")
        # An instant, not local time: every machine must derive the same store_id.
        timestamp = getattr(created, "timestamp", None)
        stamp = f"{timestamp():.3f}" if callable(timestamp) else str(created or "")
        ttl_desc = ttl.get("TimeToLiveDescription") or {}
        replicas = tuple(
            str(r.get("RegionName", "?"))
            for r in table.get("Replicas") or []
            if isinstance(r, dict)
        )
        return cls(
            name=str(table.get("TableName", "")),
            table_id=str(table.get("TableId") or ""),
            arn=str(table.get("TableArn") or ""),
            created=stamp,
            status=str(table.get("TableStatus") or ""),
            key_ok=key_ok,
            ttl_status=str(ttl_desc.get("TimeToLiveStatus") or "DISABLED"),
            ttl_attribute=str(ttl_desc.get("AttributeName") or ""),
            replicas=replicas,
            multi_region=str(table.get("MultiRegionConsistency") or "EVENTUAL"),
            server=server,
        )

    @property
    def identity(self) -> str:
        """The table's native identity; changes when the table is re-created or restored."""
        return f"{self.arn}|{self.table_id}|{self.created}"


def table_of(answer: Any) -> dict[str, Any]:
    """A ``DescribeTable`` answer's table description (none: unavailable)."""
    table = answer.get("Table") if isinstance(answer, dict) else None
    if not isinstance(table, dict):
        raise LedgerUnavailable("DescribeTable answered without a table description")
    return table


def server_header(answer: Any) -> str:
    """The answering server's ``Server`` header (emulators name themselves there)."""
    meta = answer.get("ResponseMetadata") if isinstance(answer, dict) else None
    headers = meta.get("HTTPHeaders") if isinstance(meta, dict) else None
    found = headers.items() if isinstance(headers, dict) else ()
    # botocore lowercases header names; aiobotocore keeps the server's spelling.
    return next((v for n, v in found if str(n).lower() == "server" and isinstance(v, str)), "")


def is_moto(facts: TableFacts, endpoint_url: str | None) -> bool:
    """moto's server mode: by its ``Server`` header (aiohttp shows only the last one), or
    by its tables' shape (moto's default account, no ``TableId``)."""
    if MOTO_SERVER in facts.server.lower():
        return True
    return (
        not is_aws_endpoint(endpoint_url)
        and not facts.table_id
        and f":{MOTO_ACCOUNT}:" in facts.arn
    )


def check_usable(facts: TableFacts, location: str) -> None:
    """Refuse a table that is not ready, or whose key is not the ledger's."""
    if facts.status not in USABLE_STATUS:
        raise LedgerUnavailable(f"table {location} is {facts.status or 'in an unknown state'}")
    if not facts.key_ok:
        raise UnsafeStoreConfig(
            f"table {location} exists but its key is not the ledger's (a single binary "
            f"partition key {KEY!r}): another application's table? refusing to write to it"
        )


def refusals(facts: TableFacts, settings: Settings, endpoint_url: str | None) -> list[str]:
    """Why this table cannot back a proof (empty: it can)."""
    return [reason for _, reason in judged(facts, settings, endpoint_url)]


def judged(
    facts: TableFacts, settings: Settings, endpoint_url: str | None
) -> list[tuple[str, str]]:
    """:func:`refusals`, each with the fact (the doctor's line) it is about."""
    reasons: list[tuple[str, str]] = []
    if facts.ttl_status in ("ENABLED", "ENABLING") and facts.ttl_attribute in OUR_ATTRIBUTES:
        why = f"Time to Live is on for attribute {facts.ttl_attribute!r}, which the ledger "
        reasons.append(("ttl", why + "writes: DynamoDB may delete spent records (C2)"))
    if facts.replicas and facts.multi_region.upper() != "STRONG":
        why = "a global table with multi-Region eventual consistency (replicas: "
        why += f"{', '.join(facts.replicas)}): two Regions can both accept one id, last "
        reasons.append(("replicas", why + "writer wins"))
    if not is_aws_endpoint(endpoint_url) and settings.durability != Durability.PROCESS:
        why = f"endpoint {shown_endpoint(endpoint_url)} is not AWS DynamoDB: an emulator's "
        why += "persistence cannot be read through the API (dynalite without --path and "
        why += "DynamoDB Local -inMemory keep nothing); pass durability=process if it keeps "
        reasons.append(("endpoint", why + "its data on disk"))
    if is_moto(facts, endpoint_url):
        why = "the endpoint is moto (server mode): it keeps everything in memory, and its "
        why += "conditional put is not atomic under contention (the conformance suite saw "
        why += "two concurrent spends of one id both return True); "
        reasons.append(("endpoint", why + "never a proof"))
    if not facts.table_id and not facts.arn:
        why = "the table has neither a TableId nor an ARN to derive an identity from"
        reasons.append(("identity", why))
    return reasons


def check_genesis(item: dict[str, Any] | None) -> bytes | None:
    if not item:
        return None
    value = binary(item, GENESIS)
    if value is None or len(value) != GENESIS_BYTES:
        raise UnsafeStoreConfig(
            "the namespace's genesis item does not hold a ledger identity: something else "
            "wrote it; refusing to guess"
        )
    return value


def store_id(facts: TableFacts, genesis: bytes, namespace: str) -> str:
    digest = hashlib.sha256(
        b"\x00".join((facts.identity.encode(), genesis, namespace.encode("utf-8")))
    ).hexdigest()[:32]
    return f"dynamodb:{facts.table_id or facts.name}:{digest}"


def ledger_info(
    facts: TableFacts,
    genesis: bytes,
    settings: Settings,
    *,
    location: str,
    endpoint_url: str | None,
) -> LedgerInfo:
    reasons = refusals(facts, settings, endpoint_url)
    aws = is_aws_endpoint(endpoint_url)
    durability = Durability.MACHINE if aws else Durability.PROCESS
    if is_moto(facts, endpoint_url) or (
        reasons and not aws and settings.durability != Durability.PROCESS
    ):
        durability = Durability.NONE  # in memory, or nothing declared: nothing survives
    identity = (
        f"table {facts.arn or facts.name} (TableId {facts.table_id or '?'}, created "
        f"{facts.created or '?'}) + a random genesis value in item {KEY}=g:<namespace>, "
        "written once with a conditional put"
    )
    if not aws and settings.durability == Durability.PROCESS:
        identity += "; durability as declared (durability=process): an emulator"
    return LedgerInfo(
        backend="dynamodb",
        store_id=None if reasons else store_id(facts, genesis, settings.namespace),
        reason="; ".join(reasons) or None,
        location=location,
        namespace=settings.namespace,
        identity=identity,
        durability=durability,
    )


def forgot(location: str, detail: str) -> UnsafeStoreConfig:
    return UnsafeStoreConfig(
        f"the store forgot or its identity changed since this ledger opened ({location}: "
        f"{detail}); reopen the ledger (a new store_id: pending requests are asked again)"
    )


# The ledger's conditional puts send ReturnValuesOnConditionCheckFailure, which botocore
# knows from 2023 on; the dynamodb extra asks for boto3 >= 1.34 (botocore 1.34).
BOTOCORE_MINIMUM = (1, 34)
BOTOCORE_NEEDS = "ReturnValuesOnConditionCheckFailure on conditional puts (the extra's floor)"


def shown_endpoint(endpoint_url: str | None) -> str:
    """Scheme, host and port: never user info, a path or a query (could hold a secret)."""
    parts = urlsplit(endpoint_url or "")
    try:
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        port = ""
    return f"{parts.scheme}://{parts.hostname or '?'}{port}"


def endpoint_kind(facts: TableFacts, endpoint_url: str | None) -> str:
    if is_aws_endpoint(endpoint_url):
        return "AWS DynamoDB (a managed service: no server version to check)"
    where = shown_endpoint(endpoint_url)
    if is_moto(facts, endpoint_url):
        return f"moto (server mode) at {where}"
    server = f", server {facts.server}" if facts.server else ""
    return f"a local emulator (dynalite or DynamoDB Local) at {where}{server}"


# C6's "the records alone" cannot hold here: items go one by one, so only the order
# keeps an open ledger from answering for records already gone (docs/dynamodb.md).
EMPTYING = (
    "emptying a namespace item by item: delete its genesis item (g:<namespace>) FIRST, "
    "then its records (or delete the table); records deleted while the genesis stays "
    "read as unspent under the same store_id (C6, docs/dynamodb.md, 'Emptying a table "
    "or a namespace')"
)


PAGE = "docs/dynamodb.md"


def doctor_checks(
    facts: TableFacts,
    info: LedgerInfo,
    settings: Settings,
    endpoint_url: str | None,
    botocore_version: str,
) -> list[Check]:
    """The doctor's lines, from the facts read at open; no I/O. (Point-in-time recovery
    restores into a new table, a new store_id: it decides nothing here.)"""
    version = _version(facts, endpoint_url, botocore_version)
    lines = _table_lines(facts, settings, endpoint_url)
    return report(info, version, [*lines, Fact(EMPTYING, None, name="identity")])


def preflight_checks(
    facts: TableFacts | None,
    location: str,
    settings: Settings,
    endpoint_url: str | None,
    botocore_version: str,
) -> list[Check]:
    """``decision-ledger doctor`` before ``setup``, no I/O: the table's settings when it
    exists (``facts``; its namespace does not yet), else what ``setup`` would create and
    the endpoint judged as an open would judge it."""
    if facts is not None:
        lines = _table_lines(facts, settings, endpoint_url)
        try:
            check_usable(facts, location)
        except LedgerError as exc:
            lines.append(Fact(str(exc), False, f"see {PAGE} (status)"))
        lines.append(Fact(f"setup writes namespace {settings.namespace!r}'s genesis item", None))
    else:
        blank = TableFacts.read({}, {})  # no table: only the endpoint can be judged
        endpoint = [r for r in judged(blank, settings, endpoint_url) if r[0] == "endpoint"]
        lines = topics([("endpoint", _endpoint_line(endpoint_url))], endpoint, PAGE)
        lines += [
            Fact(f"{location} answered a signed DescribeTable: the credentials are accepted"),
            Fact(
                f"setup creates table {location} (on-demand capacity, deletion protection "
                f"on, binary partition key {KEY!r}) and the namespace's genesis item",
                None,
            ),
        ]
    version = _version(facts, endpoint_url, botocore_version)
    return [version.check(), *(line.check() for line in lines)]


def _version(facts: TableFacts | None, endpoint_url: str | None, botocore_version: str) -> Fact:
    kind = endpoint_kind(facts or TableFacts.read({}, {}), endpoint_url)
    return version_fact(
        "botocore",
        parse_version(botocore_version),
        BOTOCORE_MINIMUM,
        BOTOCORE_NEEDS,
        f"endpoint: {kind}",
        shown=botocore_version,
        unknown="its version is unknown",
    )


def _endpoint_line(endpoint_url: str | None) -> str:
    if is_aws_endpoint(endpoint_url):
        return "AWS DynamoDB: writes are replicated before they are acknowledged"
    return "an emulator, accepted with durability=process"


def _table_lines(facts: TableFacts, settings: Settings, endpoint_url: str | None) -> list[Fact]:
    if facts.replicas:
        replicas = f"global table (replicas: {', '.join(facts.replicas)}; {facts.multi_region})"
    else:
        replicas = "a single-Region table"
    ttl = f"Time to Live {facts.ttl_status}"
    if facts.ttl_attribute:
        ttl += f" on {facts.ttl_attribute!r} (not an attribute the ledger writes)"
    passing = [
        ("status", f"table {facts.name} {facts.status}, key {KEY!r} (binary hash key)"),
        ("ttl", ttl),
        ("replicas", replicas),
        ("endpoint", _endpoint_line(endpoint_url)),
        ("identity", f"TableId {facts.table_id or '?'}, created {facts.created or '?'}"),
    ]
    return topics(passing, judged(facts, settings, endpoint_url), PAGE)
