"""DynamoDB: the ledger against the raw sequence with the same guarantee, on the same
boto3 / aiobotocore client and table: ``put_item`` with ``attribute_not_exists``, then (an
id spent here) a strongly consistent ``get_item`` of a genesis item, the proof that the
store is still the one the ledger opened (C6); reads a consistent ``get_item``, then (an
absent id) the same genesis read. Round trips: spend of a new id 2, of a spent id 1,
``is_spent`` of a spent id 1 (2 when absent). ``put_item`` alone (no proof) runs beside.

The server is the harness's dynalite (an on-disk store, so ``durability=process``;
``LEDGER_BENCH_DYNAMODB_EMULATOR=dynamodb-local``: Amazon's DynamoDB Local), or the URL
given (``dynamodb://TABLE?region=...&endpoint_url=...``; real AWS works). Peers,
on the same endpoint: cachelib's ``DynamoDbCache.add`` and AWS Lambda Powertools'
idempotency (its conditional put, then the save of the result), each in its own table
with a string key, made here (cachelib would ask for a TTL, which dynalite cannot set).
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, asynccontextmanager, contextmanager, suppress
from typing import Any
from urllib.parse import unquote

import boto3

from bench.measure import PEER, AsyncContender, Contender, SyncOp, async_pair, ops, pair
from bench.stores import Subject, chunks, optional, versions
from ledger_core.opening import OpenRequest
from ledger_dynamodb import AsyncDynamoDBLedger, DynamoDBLedger
from ledger_dynamodb.options import LEDGER_OPTIONS, is_aws_endpoint
from tests.servers import dynamodb as servers

NAME = "dynamodb"
SCHEMES = ("dynamodb",)
UNAVAILABLE = servers.ServerUnavailable
RAW_CALLS = "put_item + genesis get_item / get_item"
ALONE = "put_item alone (no proof)"
TABLE = "decision-ledger-bench"
TOKEN = os.urandom(16)


EMULATOR_ENV = "LEDGER_BENCH_DYNAMODB_EMULATOR"  # dynalite (default) or dynamodb-local


@contextmanager
def server() -> Iterator[str]:
    emulator = os.environ.get(EMULATOR_ENV, servers.DYNALITE)
    with servers.dynamodb_target(TABLE, emulator) as target:
        yield target.url


def _where(url: str) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """The table, the client's arguments, and the ledger's options of ``url``."""
    request = OpenRequest.build(url)
    parts = request.url.parts
    table = unquote(parts.netloc + parts.path).strip("/")
    given = request.options
    where = {"region_name": given.get("region"), "endpoint_url": given.get("endpoint_url")}
    options: dict[str, Any] = {k: v for k, v in given.items() if k in LEDGER_OPTIONS}
    options["namespace"] = request.namespace
    if not is_aws_endpoint(where["endpoint_url"]):
        options.setdefault("durability", "process")  # an emulator's disk store (docs)
    return table, where, options


def _key(rid: str) -> dict[str, Any]:
    return {"pk": {"B": b"raw:" + rid.encode()}}


GENESIS_KEY = {"pk": {"B": b"raw-genesis"}}  # not under raw: no raw id can name it
GENESIS = {"gen": {"B": TOKEN}}


def _proven(answer: Any) -> None:
    """The raw side's proof: its genesis item, as it wrote it."""
    if answer.get("Item", {}).get("gen") != GENESIS["gen"]:
        raise RuntimeError("the raw genesis item is gone: the bench's table was replaced")


def subject(url: str, stack: ExitStack) -> Subject:
    servers.local_credentials()
    table, where, options = _where(url)
    client: Any = boto3.session.Session().client("dynamodb", **where)
    stack.callback(client.close)
    ledger = DynamoDBLedger.from_client(client, table, **options)
    stack.callback(ledger.close)
    failed = client.exceptions.ConditionalCheckFailedException
    client.put_item(TableName=table, Item={**GENESIS_KEY, **GENESIS})
    genesis: dict[str, Any] = {"TableName": table, "Key": GENESIS_KEY, "ConsistentRead": True}

    def put(rid: str) -> object:
        try:
            client.put_item(
                TableName=table,
                Item={**_key(rid), "tok": {"B": TOKEN}},
                ConditionExpression="attribute_not_exists(pk)",
            )
        except failed:  # the raw call's "already spent"
            return False
        return True

    def raw_spend(rid: str) -> object:
        if not put(rid):
            return False
        _proven(client.get_item(**genesis))
        return True

    def raw_is_spent(rid: str) -> object:
        if "Item" in client.get_item(TableName=table, Key=_key(rid), ConsistentRead=True):
            return True
        _proven(client.get_item(**genesis))
        return False

    contenders = pair(ledger, RAW_CALLS, raw_spend, raw_is_spent)
    contenders.append(Contender(ALONE, PEER, ops(put, None)))
    contenders.extend(_peers(client, where))

    def preload(numbers: range) -> None:
        def batch(part: range) -> None:
            items: list[Any] = [
                {"PutRequest": {"Item": {"pk": {"B": f"pre:{numbers[i]}".encode()}}}} for i in part
            ]
            while items:
                left = client.batch_write_item(RequestItems={table: items})
                items = left.get("UnprocessedItems", {}).get(table, [])

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(batch, chunks(len(numbers), 25)))

    @asynccontextmanager
    async def open_async() -> AsyncIterator[list[AsyncContender]]:
        from aiobotocore.session import get_session

        async with get_session().create_client("dynamodb", **where) as aclient:
            aledger = await AsyncDynamoDBLedger.from_client(aclient, table, **options)
            afailed = aclient.exceptions.ConditionalCheckFailedException

            async def aput(rid: str) -> object:
                try:
                    await aclient.put_item(
                        TableName=table,
                        Item={**_key(rid), "tok": {"B": TOKEN}},
                        ConditionExpression="attribute_not_exists(pk)",
                    )
                except afailed:
                    return False
                return True

            async def araw_spend(rid: str) -> object:
                if not await aput(rid):
                    return False
                _proven(await aclient.get_item(**genesis))
                return True

            async def araw_is_spent(rid: str) -> object:
                got = await aclient.get_item(TableName=table, Key=_key(rid), ConsistentRead=True)
                if "Item" in got:
                    return True
                _proven(await aclient.get_item(**genesis))
                return False

            contenders = async_pair(aledger, RAW_CALLS, araw_spend, araw_is_spent)
            contenders.append(AsyncContender(ALONE, PEER, ops(aput, None)))
            try:
                yield contenders
            finally:
                await aledger.aclose()

    return Subject(
        NAME,
        f"DynamoDB API at {where['endpoint_url'] or 'AWS'} "
        f"(durability {ledger.describe().durability})",
        contenders,
        preload,
        open_async,
        versions("boto3", "aiobotocore", "cachelib", "aws-lambda-powertools"),
        [
            "Powertools idempotent: `@idempotent_function` (its conditional put of an "
            "in-progress record, then the save of the result: two writes per new id)."
        ]
        if any(c.name == "Powertools idempotent" for c in contenders)
        else [],
    )


def _peers(client: Any, where: dict[str, Any]) -> list[Contender]:
    """cachelib's add and Powertools' idempotent function, when installed."""
    found: list[Contender] = []
    cachelib = optional("cachelib.dynamodb")
    if cachelib is not None:
        _string_table(client, "bench-cachelib", "cache_key")
        cache = cachelib.DynamoDbCache(table_name="bench-cachelib", default_timeout=0, **where)

        def add(rid: str) -> object:
            return cache.add(rid, 1)

        found.append(Contender("cachelib add / has", PEER, ops(add, cache.has)))
    idempotency = optional("aws_lambda_powertools.utilities.idempotency")
    if idempotency is not None:
        _string_table(client, "bench-powertools", "id")
        layer = idempotency.DynamoDBPersistenceLayer(
            table_name="bench-powertools", boto3_client=client
        )

        @idempotency.idempotent_function(  # type: ignore[untyped-decorator]
            data_keyword_argument="rid",
            persistence_store=layer,
            config=idempotency.IdempotencyConfig(),
        )
        def run_once(rid: str) -> int:
            return 1

        def powertools(rid: str) -> object:
            return run_once(rid=rid)

        # Outside Lambda it warns, on every call, that it cannot read the time left.
        warnings.filterwarnings("ignore", "Couldn't determine the remaining time")
        spend: SyncOp = powertools
        found.append(Contender("Powertools idempotent", PEER, ops(spend, None)))
    return found


def _string_table(client: Any, table: str, key: str) -> None:
    with suppress(client.exceptions.ResourceInUseException):  # it exists: fine
        client.create_table(
            TableName=table,
            KeySchema=[{"AttributeName": key, "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": key, "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
    deadline = time.monotonic() + 60
    while client.describe_table(TableName=table)["Table"]["TableStatus"] != "ACTIVE":
        if time.monotonic() > deadline:
            raise TimeoutError(f"table {table} not active within 60 s")
        time.sleep(0.1)
