"""DynamoDB requests, built without I/O: API parameters and the key encoding.

An item's binary partition key ``pk`` is ``ledger_key(namespace, id)`` (C7), which starts
with a digit; a namespace's genesis item is ``g:`` + the namespace, which no record key
can equal. Ids are stored as their exact bytes (C8), under the 2048-byte key limit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ledger_core.ids import ledger_key

KEY = "pk"  # the partition key (binary)
TOKEN = "tok"  # the attempt token of the spend that wrote the record (C5)
GENESIS = "gen"  # the random identity value in a namespace's genesis item (C6)
DIGEST = "dig"  # the attempt key's digest of a spend_as record (C10)
OUR_ATTRIBUTES = frozenset({KEY, TOKEN, GENESIS, DIGEST})
GENESIS_PREFIX = b"g:"
SCAN_SEGMENTS = 4


@dataclass(frozen=True)
class Call:
    """One API call: by when (``time.monotonic()``) it must have ended, and how long one
    attempt may wait; the shell enforces both."""

    op: str
    params: dict[str, Any] = field(default_factory=dict)
    due: float = math.inf
    share: float = math.inf


@dataclass(frozen=True)
class Sleep:
    seconds: float


Request = Call | Sleep


def record_prefix(namespace: str) -> bytes:
    """Every record key of ``namespace`` starts with this (and no other's does)."""
    return ledger_key(namespace, b"")


def genesis_key(namespace: str) -> bytes:
    return GENESIS_PREFIX + namespace.encode("utf-8")


def _put(table: str, item: dict[str, bytes], condition: str) -> Call:
    """A conditional put; on a conditional failure the stored item comes back."""
    return Call(
        "put_item",
        {
            "TableName": table,
            "Item": {name: {"B": value} for name, value in item.items()},
            "ConditionExpression": condition,
            "ExpressionAttributeNames": {"#k": KEY},
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        },
    )


def put_new(table: str, key: bytes, token: bytes) -> Call:
    """The spend: the record only if no item has this key (its token tells a retry of
    ours from another's)."""
    return _put(table, {KEY: key, TOKEN: token}, "attribute_not_exists(#k)")


def put_as(table: str, key: bytes, token: bytes, digest: bytes) -> Call:
    """The re-entrant spend (C10): the record with the attempt key's digest if no item
    has this key or the stored one holds the same digest (a plain spend's has none)."""
    call = _put(
        table, {KEY: key, TOKEN: token, DIGEST: digest}, "attribute_not_exists(#k) OR #d = :d"
    )
    call.params["ExpressionAttributeNames"]["#d"] = DIGEST
    call.params["ExpressionAttributeValues"] = {":d": {"B": digest}}
    return call


def put_genesis(table: str, namespace: str, value: bytes) -> Call:
    return _put(table, {KEY: genesis_key(namespace), GENESIS: value}, "attribute_not_exists(#k)")


def replace_genesis(table: str, namespace: str, old: bytes, value: bytes) -> Call:
    """A fresh genesis ``value`` (``reidentify``), only over the ``old`` one."""
    call = _put(
        table, {KEY: genesis_key(namespace), GENESIS: value}, "attribute_exists(#k) AND #g = :g"
    )
    call.params["ExpressionAttributeNames"]["#g"] = GENESIS
    call.params["ExpressionAttributeValues"] = {":g": {"B": old}}
    return call


def get(table: str, key: bytes) -> Call:
    """A strongly consistent read of one item (C3: never an eventually consistent one)."""
    return Call("get_item", {"TableName": table, "Key": {KEY: {"B": key}}, "ConsistentRead": True})


def exists(table: str, key: bytes) -> Call:
    """The same read, projecting only the key: ``is_spent`` needs presence."""
    return Call(
        "get_item",
        {
            "TableName": table,
            "Key": {KEY: {"B": key}},
            "ConsistentRead": True,
            "ProjectionExpression": "#k",
            "ExpressionAttributeNames": {"#k": KEY},
        },
    )


def describe_table(table: str) -> Call:
    return Call("describe_table", {"TableName": table})


def describe_ttl(table: str) -> Call:
    return Call("describe_time_to_live", {"TableName": table})


def create_table(table: str) -> Call:
    """On-demand capacity, deletion protection on: a ledger table must not be dropped."""
    return Call(
        "create_table",
        {
            "TableName": table,
            "KeySchema": [{"AttributeName": KEY, "KeyType": "HASH"}],
            "AttributeDefinitions": [{"AttributeName": KEY, "AttributeType": "B"}],
            "BillingMode": "PAY_PER_REQUEST",
            "DeletionProtectionEnabled": True,
        },
    )


def scan(table: str, prefixes: list[bytes], segment: int, start: dict[str, Any] | None) -> Call:
    """One page of one consistent parallel Scan segment of the keys under any of
    ``prefixes`` (``begins_with`` on the binary key: literal, no pattern)."""
    names = [f":p{i}" for i in range(len(prefixes))]
    params: dict[str, Any] = {
        "TableName": table,
        "ConsistentRead": True,
        "Segment": segment,
        "TotalSegments": SCAN_SEGMENTS,
        "ProjectionExpression": "#k",
        "FilterExpression": " OR ".join(f"begins_with(#k, {n})" for n in names),
        "ExpressionAttributeNames": {"#k": KEY},
        "ExpressionAttributeValues": {n: {"B": p} for n, p in zip(names, prefixes, strict=True)},
    }
    if start is not None:
        params["ExclusiveStartKey"] = start
    return Call("scan", params)


def binary(item: dict[str, Any] | None, name: str) -> bytes | None:
    """A binary attribute of a returned item (botocore decodes ``B`` to bytes)."""
    if not item:
        return None
    value = item.get(name)
    if not isinstance(value, dict):
        return None
    raw = value.get("B")
    return bytes(raw) if isinstance(raw, (bytes, bytearray)) else None
