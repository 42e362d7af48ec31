"""A DynamoDB table restored to the same name (deleted, created again, the backup's items
written back), and ``reidentify`` (C6): instances opened before fail closed at once,
not at their next table re-check."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import botocore.exceptions
import pytest

from tests.dynamodb import tools
from tests.dynamodb.test_conformance_dynamodb import Restore
from tests.restoring import restored_then_reidentified


@pytest.fixture
def table_url(dynamodb_url: str, request: pytest.FixtureRequest) -> Iterator[str]:
    """A table of this test's own (the restore re-creates it), deleted afterwards."""
    name = f"r-{tools.RUN}-{request.node.name}"[:200].replace("[", "-").replace("]", "")
    url = dynamodb_url.replace(tools.url_parts(dynamodb_url)[0], name, 1)
    yield url
    client = tools.admin_client(url)
    with contextlib.suppress(botocore.exceptions.ClientError):
        client.update_table(TableName=name, DeletionProtectionEnabled=False)
    with contextlib.suppress(botocore.exceptions.ClientError):
        client.delete_table(TableName=name)
    client.close()


def test_a_table_restored_to_its_name_fails_closed_once_reidentified(table_url: str) -> None:
    restore = Restore(table_url)

    def whole_table(phase: str, namespace: str) -> None:
        restore(phase)  # every item: the table deleted and created again

    options = tools.ledger_options(table_url)
    restored_then_reidentified(table_url, "ns", whole_table, **options)
