"""Helpers shared by the DynamoDB tests and bench: factories, an admin client, forget."""

from __future__ import annotations

import contextlib
import functools
import math
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import boto3
import botocore.exceptions
import pytest

from ledger_conformance import LedgerContext, create_option, offers_create
from ledger_conformance.urlmode import rewrite
from ledger_core import open_async_ledger, open_ledger
from ledger_dynamodb import DynamoDBLedger, items
from ledger_dynamodb.identity import GENESIS_BYTES
from ledger_dynamodb.options import Settings, Target, is_aws_endpoint
from tests.servers import dynamodb as servers

RUN = os.urandom(4).hex()  # fresh namespaces each session: a server may be shared
TIMEOUT = "5"  # seconds per whole call: black holes end quickly, a loaded JVM answers


GENESIS = b"g" * GENESIS_BYTES  # an offline ledger's genesis value


@dataclass(frozen=True)
class Call:
    """One call a ledger made on its client, as a test's hook or script sees it."""

    op: str
    params: dict[str, Any]


Perform = Callable[[Call], Any]


class Scripted:
    """A client whose every call is answered by ``answer(call)``; ``close`` calls
    ``on_close`` (nothing by default)."""

    def __init__(self, answer: Perform, on_close: Callable[[], object] = lambda: None):
        self._answer, self._on_close = answer, on_close

    def __getattr__(self, op: str) -> Callable[..., Any]:
        return lambda **params: self._answer(Call(op, params))

    def close(self) -> None:
        self._on_close()


def inject(ledger: Any, hook: Callable[[Call, Perform], Any]) -> None:
    """Route every call of a sync ledger's client through ``hook(call, perform)``
    (``perform`` sends it on the real client), so the code under test is the shipped one."""
    real = ledger._client

    def perform(call: Call) -> Any:
        return getattr(real, call.op)(**call.params)

    ledger._client = Scripted(lambda call: hook(call, perform), real.close)


def offline_ledger(answer: Perform, **settings: Any) -> DynamoDBLedger:
    """A sync ledger as if opened on a namespace whose genesis is :data:`GENESIS`, with
    no re-check due, on a client answered by ``answer``: no server, no I/O at open."""
    client = Scripted(answer)
    target = Target("ledger", None, None, None, Settings(**settings))
    ledger = DynamoDBLedger(target, client)
    ledger._genesis, ledger._genesis_attr = GENESIS, {"B": GENESIS}
    ledger._recheck.next = math.inf
    ledger._cleared = True  # no migration check: it would read markers
    return ledger


def on_emulators(*emulators: str) -> Any:
    """A ``dynamodb_target`` fixture over ``emulators`` (each from the session's pool): a
    module narrows its tests to one emulator by assigning it to that name."""

    @pytest.fixture(name="dynamodb_target", params=emulators)
    def target(request: pytest.FixtureRequest, dynamodb_pool: servers.Pool) -> servers.Target:
        try:
            return dynamodb_pool.get(request.param)
        except servers.ServerUnavailable as exc:
            pytest.skip(str(exc))

    return target


def url_parts(url: str) -> tuple[str, dict[str, str]]:
    parts = urlsplit(url)
    return parts.netloc + parts.path, dict(parse_qsl(parts.query))


def with_query(url: str, **changes: str) -> str:
    table, query = url_parts(url)
    query.update(changes)
    return f"dynamodb://{table}?{urlencode(query)}"


def emulator(url: str) -> bool:
    return not is_aws_endpoint(url_parts(url)[1].get("endpoint_url"))


def ledger_options(url: str, **extra: str) -> dict[str, str]:
    """Our test options: a short timeout, and durability=process on an emulator run
    with an on-disk store (measured: dynalite --path survives kill -9)."""
    options = {"timeout": TIMEOUT, **extra}
    if emulator(url):
        options.setdefault("durability", "process")
    return options


def factory(url: str, prefix: str = "conf") -> Callable[[LedgerContext], Any]:
    """A partial of a module-level callable with this session's RUN bound in: a freshly
    spawned interpreter rebuilds it and reaches the same namespaces."""
    return offers_create(functools.partial(open_prefixed, url, f"{prefix}-{RUN}"))


def open_prefixed(url: str, prefix: str, ctx: LedgerContext) -> Any:
    target = rewrite(url, ctx)  # the backend's reroute hook, as in URL mode
    namespace = f"{prefix}-{ctx.store}"[:256]
    opener = open_async_ledger if ctx.flavor == "async" else open_ledger
    return opener(target, namespace=namespace, **ledger_options(url), **create_option(ctx))


@contextlib.contextmanager
def table_of_its_own(url: str, test: str, prefix: str) -> Iterator[str]:
    """``url`` on a table named for ``test``, deleted afterwards (whatever the test did)."""
    name = f"{prefix}-{RUN}-{test}"[:200].replace("[", "-").replace("]", "")
    yield url.replace(url_parts(url)[0], name, 1)
    client = admin_client(url)
    with contextlib.suppress(botocore.exceptions.ClientError):
        client.update_table(TableName=name, DeletionProtectionEnabled=False)
    with contextlib.suppress(botocore.exceptions.ClientError):
        client.delete_table(TableName=name)
    client.close()


def admin_client(url: str) -> Any:
    _table, query = url_parts(url)
    return boto3.session.Session(profile_name=query.get("profile")).client(
        "dynamodb", region_name=query.get("region"), endpoint_url=query.get("endpoint_url")
    )


def _wait(check: Callable[[], bool], what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} within {timeout} s")
        time.sleep(0.005)


def forget(url: str, admin: Any = None) -> None:
    """Make the table forget everything: delete it and create it again (empty), on
    ``admin`` (a client made beforehand: making one takes a tenth of a second)."""
    table, _query = url_parts(url)
    client = admin or admin_client(url)
    try:
        # An emulator without deletion protection refuses the update: nothing to turn off.
        with contextlib.suppress(client.exceptions.ClientError):
            client.update_table(TableName=table, DeletionProtectionEnabled=False)
        _wait(lambda: _status(client, table) in ("ACTIVE", None), "table update")
        client.delete_table(TableName=table)
        _wait(lambda: _status(client, table) is None, "table deletion")
        client.create_table(**items.create_table(table))
        _wait(lambda: _status(client, table) == "ACTIVE", "table creation")
    finally:
        if admin is None:
            client.close()


def _status(client: Any, table: str) -> str | None:
    try:
        status: str = client.describe_table(TableName=table)["Table"]["TableStatus"]
        return status
    except client.exceptions.ResourceNotFoundException:
        return None


def delete_every_item(url: str, admin: Any) -> None:
    """Empty the table (the DynamoDB form of TRUNCATE): every item, the genesis items
    first. DynamoDB has no atomic truncate; records deleted while their namespace's
    genesis still stands are lost inside one store, which no design can see (a
    transaction's snapshot would see it too), so a forget removes the genesis first."""
    table, _query = url_parts(url)
    pages = admin.get_paginator("scan").paginate(TableName=table, ConsistentRead=True)
    keys = [item[items.KEY]["B"] for page in pages for item in page.get("Items", [])]
    keys.sort(key=lambda key: not key.startswith(items.GENESIS_PREFIX))
    for key in keys:
        admin.delete_item(TableName=table, Key={items.KEY: {"B": key}})
