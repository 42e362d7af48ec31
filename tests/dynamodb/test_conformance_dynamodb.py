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
from ledger_dynamodb import items
from tests.dynamodb import tools
from tests.restoring import AfterRestore
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
        FilterExpression=f"begins_with({items.KEY}, :p)",
        ExpressionAttributeValues={":p": {"B": items.record_prefix(namespace)}},
        ProjectionExpression=items.KEY,
    )
    keys = [item[items.KEY]["B"] for page in pages for item in page.get("Items", [])]
    for key in [items.genesis_key(namespace), *keys]:
        admin.delete_item(TableName=table, Key={items.KEY: {"B": key}})


def namespace_of(label: str) -> str:
    return f"conf-{tools.RUN}-{label}"[:256]


class Restore:
    """The suite's restore hook, as a restore to the same table name does: the snapshot
    is every item of the namespace (of the table when told none), read consistently;
    the restore deletes the table, creates it again and writes the snapshot back."""

    def __init__(self, url: str, namespace_of: Callable[[str], str] = namespace_of) -> None:
        self.url, self.namespace_of = url, namespace_of
        self.items: list[dict[str, Any]] = []

    def __call__(self, phase: str, label: str | None = None) -> None:
        table, _query = tools.url_parts(self.url)
        admin = tools.admin_client(self.url)
        try:
            if phase == "snapshot":
                scan: dict[str, Any] = {"TableName": table, "ConsistentRead": True}
                if label is not None:
                    scan["FilterExpression"] = f"{items.KEY} IN (:g) OR begins_with(#k, :p)"
                    scan["ExpressionAttributeNames"] = {"#k": items.KEY}
                    namespace = self.namespace_of(label)
                    scan["ExpressionAttributeValues"] = {
                        ":g": {"B": items.genesis_key(namespace)},
                        ":p": {"B": items.record_prefix(namespace)},
                    }
                pages = admin.get_paginator("scan").paginate(**scan)
                self.items = [item for page in pages for item in page.get("Items", [])]
                return
            tools.forget(self.url, admin)  # deleted and created again, empty
            for start in range(0, len(self.items), 25):
                writes = [{"PutRequest": {"Item": item}} for item in self.items[start : start + 25]]
                pending: dict[str, Any] = {table: writes}
                while pending:
                    pending = admin.batch_write_item(RequestItems=pending)["UnprocessedItems"]
        finally:
            admin.close()


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
    def ledger_model_examples(self) -> int | None:
        """M1's sequences each open two stores, and dynalite's open is slow (about 100 s
        for the profile's 8 sequences, sync and async, on a loaded machine); CI's DynamoDB
        Local run keeps the profile's number."""
        return 4 if os.environ.get(SUITE_ENV, servers.DYNALITE) == servers.DYNALITE else None

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
                forget_namespace(dynamodb_url, namespace_of(label), admin)

        yield forget
        admin.close()

    @pytest.fixture
    def ledger_restore(self, dynamodb_url: str) -> Restore:
        return Restore(dynamodb_url)

    @pytest.fixture
    def ledger_after_restore(self, dynamodb_url: str) -> AfterRestore:
        return AfterRestore(dynamodb_url, namespace_of, options=tools.ledger_options(dynamodb_url))
