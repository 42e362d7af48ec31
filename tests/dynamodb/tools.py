"""Helpers shared by the DynamoDB tests and bench: factories, an admin client, forget."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import boto3

from ledger_conformance import LedgerContext
from ledger_conformance.urlmode import rewrite
from ledger_core import open_async_ledger, open_ledger
from ledger_dynamodb import commands
from ledger_dynamodb.options import is_aws_endpoint

RUN = os.urandom(4).hex()  # fresh namespaces each session: a server may be shared
TIMEOUT = "3"  # seconds per whole call: black holes end quickly


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
    def make(ctx: LedgerContext) -> Any:
        target = rewrite(url, ctx)  # the backend's reroute hook, as in URL mode
        namespace = f"{prefix}-{RUN}-{ctx.store}"[:256]
        opener = open_async_ledger if ctx.flavor == "async" else open_ledger
        return opener(target, namespace=namespace, **ledger_options(url))

    return make


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
        time.sleep(0.05)


def forget(url: str) -> None:
    """Make the table forget everything: delete it and create it again (empty)."""
    table, _query = url_parts(url)
    client = admin_client(url)
    try:
        # An emulator without deletion protection refuses the update: nothing to turn off.
        with contextlib.suppress(client.exceptions.ClientError):
            client.update_table(TableName=table, DeletionProtectionEnabled=False)
        _wait(lambda: _status(client, table) in ("ACTIVE", None), "table update")
        client.delete_table(TableName=table)
        _wait(lambda: _status(client, table) is None, "table deletion")
        client.create_table(**commands.create_table(table).params)
        _wait(lambda: _status(client, table) == "ACTIVE", "table creation")
    finally:
        client.close()


def _status(client: Any, table: str) -> str | None:
    try:
        status: str = client.describe_table(TableName=table)["Table"]["TableStatus"]
        return status
    except client.exceptions.ResourceNotFoundException:
        return None
