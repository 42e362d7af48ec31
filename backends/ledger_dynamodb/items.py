"""The table's item layout and the API parameters that name it, built without I/O.

An item's binary partition key ``pk`` is ``ledger_key(namespace, id)`` (C7), which starts
with a digit; a namespace's genesis item is ``g:`` + the namespace, which no record key
can equal. Ids are stored as their exact bytes (C8), under the 2048-byte key limit.
A ledger builds its per-table parameters once, at open: a spend adds only its item.
"""

from __future__ import annotations

from typing import Any

from ledger_core.ids import ledger_key

KEY = "pk"  # the partition key (binary)
TOKEN = "tok"  # the attempt token of the spend that wrote the record (C5)
GENESIS = "gen"  # the random identity value in a namespace's genesis item (C6)
DIGEST = "dig"  # the attempt key's digest of a spend_as record (C10)
OUR_ATTRIBUTES = frozenset({KEY, TOKEN, GENESIS, DIGEST})
GENESIS_PREFIX = b"g:"
SCAN_SEGMENTS = 4
NEW = "attribute_not_exists(#k)"  # no item has this key
NEW_OR_SAME_DIGEST = "attribute_not_exists(#k) OR #d = :d"  # C10 (the digest added per call)
SAME_GENESIS = "attribute_exists(#k) AND #g = :g"  # reidentify: only over the old genesis


def record_prefix(namespace: str) -> bytes:
    """Every record key of ``namespace`` starts with this (and no other's does)."""
    return ledger_key(namespace, b"")


def genesis_key(namespace: str) -> bytes:
    return GENESIS_PREFIX + namespace.encode("utf-8")


def put(table: str, condition: str, **names: str) -> dict[str, Any]:
    """A conditional put without its item; on a conditional failure the stored item comes
    back (DynamoDB sends it; dynalite and some emulators do not)."""
    return {
        "TableName": table,
        "ConditionExpression": condition,
        "ExpressionAttributeNames": {"#k": KEY, **names},
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }


def get(table: str, key: bytes, *, only_key: bool = False) -> dict[str, Any]:
    """A strongly consistent read of one item (C3: never an eventually consistent one);
    ``only_key`` projects the key alone (``is_spent`` needs presence)."""
    params: dict[str, Any] = {"TableName": table, "Key": {KEY: {"B": key}}, "ConsistentRead": True}
    if only_key:
        params.update(ProjectionExpression="#k", ExpressionAttributeNames={"#k": KEY})
    return params


def create_table(table: str) -> dict[str, Any]:
    """On-demand capacity, deletion protection on: a ledger table must not be dropped."""
    return {
        "TableName": table,
        "KeySchema": [{"AttributeName": KEY, "KeyType": "HASH"}],
        "AttributeDefinitions": [{"AttributeName": KEY, "AttributeType": "B"}],
        "BillingMode": "PAY_PER_REQUEST",
        "DeletionProtectionEnabled": True,
    }


def scan(
    table: str, prefixes: list[bytes], segment: int, start: dict[str, Any] | None
) -> dict[str, Any]:
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
    return params


def batch_read(answer: Any, table: str) -> tuple[list[Any], list[Any]] | None:
    """A ``BatchGetItem`` answer's items of ``table`` and the keys it left unprocessed
    (to ask again); ``None`` when it holds neither as it should (nothing was read). The
    table's list of items may be missing only when some of its keys were left."""
    if not isinstance(answer, dict):
        return None
    responses, unprocessed = answer.get("Responses"), answer.get("UnprocessedKeys") or {}
    left = unprocessed.get(table) or {} if isinstance(unprocessed, dict) else None
    keys = left.get("Keys") or [] if isinstance(left, dict) else None
    got = responses.get(table, [] if keys else None) if isinstance(responses, dict) else None
    if not isinstance(got, list) or not isinstance(keys, list):
        return None
    return got, keys


def binary(item: dict[str, Any] | None, name: str) -> bytes | None:
    """A binary attribute of a returned item (botocore decodes ``B`` to bytes)."""
    if not item:
        return None
    value = item.get(name)
    if not isinstance(value, dict):
        return None
    raw = value.get("B")
    return bytes(raw) if isinstance(raw, (bytes, bytearray)) else None
