"""The whole conformance suite against DynamoDB, on dynalite or on DynamoDB Local (each
with an on-disk store; one per session), sync and async, through the fault proxy (the
``endpoint_url`` goes through ``ctx.route``), with a kill -9 restart hook (C2) and a
forget hook (every item deleted in place: an old ledger must fail closed, a new one gets
a new store_id; told a store label, that namespace's items deleted)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from ledger_conformance import LedgerConformance
from ledger_dynamodb import commands
from tests.dynamodb import tools
from tests.servers import dynamodb as servers

# One emulator per pytest session: the suite keeps session state (acknowledged spends, the
# waiting clause's ids) that two servers in one session would mix. CI runs it again with
# LEDGER_TEST_DYNAMODB_SUITE=dynamodb-local (.ci/run).
SUITE_ENV = "LEDGER_TEST_DYNAMODB_SUITE"
dynamodb_target = tools.on_emulators(os.environ.get(SUITE_ENV, servers.DYNALITE))


def forget_namespace(url: str, namespace: str, admin: Any) -> None:
    """One namespace forgets: every item of it deleted (its records and its genesis), as
    a user's scan-and-delete would; the table and the other namespaces stay."""
    table, _query = tools.url_parts(url)
    pages = admin.get_paginator("scan").paginate(
        TableName=table,
        FilterExpression=f"begins_with({commands.KEY}, :p)",
        ExpressionAttributeValues={":p": {"B": commands.record_prefix(namespace)}},
        ProjectionExpression=commands.KEY,
    )
    keys = [item[commands.KEY]["B"] for page in pages for item in page.get("Items", [])]
    for key in [commands.genesis_key(namespace), *keys]:
        admin.delete_item(TableName=table, Key={commands.KEY: {"B": key}})


class TestDynamoDB(LedgerConformance):
    @pytest.fixture
    def ledger_factory(self, dynamodb_url: str) -> Any:
        return tools.factory(dynamodb_url)

    @pytest.fixture
    def ledger_volume(self) -> int | None:
        """dynalite (a Node server) took about a minute of CI for 10,000 spends and their
        reads; CI's DynamoDB Local run keeps the profile's number, so the backend still
        meets the full volume on Amazon's own emulator every run."""
        return 2_000 if os.environ.get(SUITE_ENV, servers.DYNALITE) == servers.DYNALITE else None

    @pytest.fixture
    def ledger_restart(self, dynamodb_target: servers.Target) -> Callable[[], object] | None:
        server = dynamodb_target.server
        return server.restart if server is not None else None

    @pytest.fixture
    def ledger_forget(self, dynamodb_url: str) -> Iterator[Callable[..., object]]:
        """In place, the stronger form: every item deleted (the genesis items with the
        records), the table kept, so only the genesis proof can tell (a deleted table
        also changes its identity); test_forgetting.py re-creates it too."""
        admin = tools.admin_client(dynamodb_url)

        def forget(label: str | None = None) -> None:
            if label is None:
                tools.delete_every_item(dynamodb_url, admin)
            else:
                forget_namespace(dynamodb_url, f"conf-{tools.RUN}-{label}"[:256], admin)

        yield forget
        admin.close()
