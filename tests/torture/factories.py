"""Factories the campaign's worker processes import by path (``--factory``): each reads
its server from the environment, which spawned workers inherit."""

from __future__ import annotations

import os
from typing import Any

from ledger_conformance import LedgerContext
from ledger_conformance.urlmode import rewrite
from ledger_core import open_async_ledger, open_ledger
from ledger_core.errors import LedgerUnavailable
from tests.dynamodb import tools

DYNAMODB_ENV = "LEDGER_TORTURE_DYNAMODB_URL"
NAMESPACE_ENV = "LEDGER_TORTURE_NAMESPACE"


def dynamodb(ctx: LedgerContext) -> Any:
    """DynamoDB with its ``endpoint_url`` through ``ctx.route`` (the backend's ``reroute``
    hook), and the test server's proof options."""
    url = os.environ[DYNAMODB_ENV]
    opener = open_async_ledger if ctx.flavor == "async" else open_ledger
    namespace = f"{os.environ[NAMESPACE_ENV]}-{ctx.store}"
    return opener(rewrite(url, ctx), namespace=namespace, **tools.ledger_options(url))


SQLITE_ENV = "LEDGER_TORTURE_SQLITE"
CLOSED_ENV = "LEDGER_TORTURE_CLOSED"  # a path: once it exists, opening fails


def closes_later(ctx: LedgerContext) -> Any:
    """SQLite that refuses new opens once the file ``LEDGER_TORTURE_CLOSED`` exists (the
    ledgers already open keep working): a store gone before the final read."""
    if os.path.exists(os.environ[CLOSED_ENV]):
        raise LedgerUnavailable("the store is gone (test)")
    opener = open_async_ledger if ctx.flavor == "async" else open_ledger
    return opener(f"sqlite:///{os.environ[SQLITE_ENV]}", namespace=ctx.store)
