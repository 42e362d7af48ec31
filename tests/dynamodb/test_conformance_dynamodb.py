"""The whole conformance suite against DynamoDB (dynalite with an on-disk store locally),
sync and async, through the fault proxy (the ``endpoint_url`` goes through
``ctx.route``), with a kill -9 restart hook (C2) and a forget hook (the table deleted and
created again: an old ledger must fail closed, a new one gets a new store_id; told a
store label, that namespace's items deleted)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from ledger_conformance import LedgerConformance
from ledger_conformance.clauses.c45_faults import C45Faults
from ledger_conformance.urlmode import URLFactory
from ledger_dynamodb import commands
from tests.dynamodb import tools
from tests.pending import pending
from tests.servers import dynamodb as servers


def forget_namespace(url: str, namespace: str) -> None:
    """One namespace forgets: every item of it deleted (its records and its genesis), as
    a user's scan-and-delete would; the table and the other namespaces stay."""
    table, _query = tools.url_parts(url)
    client = tools.admin_client(url)
    try:
        pages = client.get_paginator("scan").paginate(
            TableName=table,
            FilterExpression=f"begins_with({commands.KEY}, :p)",
            ExpressionAttributeValues={":p": {"B": commands.record_prefix(namespace)}},
            ProjectionExpression=commands.KEY,
        )
        keys = [item[commands.KEY]["B"] for page in pages for item in page.get("Items", [])]
        for key in [commands.genesis_key(namespace), *keys]:
            client.delete_item(TableName=table, Key={commands.KEY: {"B": key}})
    finally:
        client.close()


class TestDynamoDB(LedgerConformance):
    # The identity is re-checked every 0.25 s instead of by each operation: reads racing
    # the deletion of one namespace's items answer from it under the old store_id (caught
    # when a read lands inside the window, so not every run).
    test_C6_forget_immediate = pending(
        LedgerConformance.test_C6_forget_immediate,
        "DynamoDB trusts a checked identity for 0.25 s",
        when={"scope": "namespace"},
        strict=False,
    )
    # ... and its window counts from the check, not from when the put lands: a put held
    # while the table is deleted and created again lands in the new table (caught when
    # the re-creation finishes within the hold, so not every run).
    # No whole-call deadline yet: waiters repeat a timed-out identity check in turn
    # under a black hole, and botocore's read timeout never trips on a trickled reply.
    test_C4_bounded_calls = pending(
        LedgerConformance.test_C4_bounded_calls,
        "a DynamoDB call is not bounded as a whole (black hole: waiters in turn; trickle)",
        strict=False,
    )
    test_C6_forget_during_request = pending(
        LedgerConformance.test_C6_forget_during_request,
        "DynamoDB's put lands in a table re-created after its identity check",
        strict=False,
    )

    @pytest.fixture
    def ledger_factory(self, dynamodb_url: str) -> Any:
        return tools.factory(dynamodb_url)

    @pytest.fixture
    def ledger_restart(self, dynamodb_target: servers.Target) -> Callable[[], object] | None:
        server = dynamodb_target.server
        return server.restart if server is not None else None

    @pytest.fixture
    def ledger_forget(self, dynamodb_url: str) -> Callable[..., object]:
        def forget(label: str | None = None) -> None:
            if label is None:
                tools.forget(dynamodb_url)
            else:
                forget_namespace(dynamodb_url, f"conf-{tools.RUN}-{label}"[:256])

        return forget


class TestDynamoDBURLModeFaults(C45Faults):
    """C4/C5 as ``--ledger-url`` runs them: the suite's URL mode finds the address through
    the backend's ``reroute`` hook (the ``endpoint_url`` in the query), not our factory."""

    @pytest.fixture
    def ledger_factory(self, dynamodb_url: str) -> Any:
        url = tools.with_query(dynamodb_url, **tools.ledger_options(dynamodb_url))
        factory = URLFactory(url, f"url-{tools.RUN}")
        assert factory.routable
        return factory
