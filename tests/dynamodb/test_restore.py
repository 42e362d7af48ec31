"""A DynamoDB table restored to the same name (deleted, created again, the backup's items
written back), and ``reidentify`` (C6): instances opened before fail closed at once,
not at their next table re-check."""

from __future__ import annotations

from tests.dynamodb import tools
from tests.dynamodb.test_conformance_dynamodb import Restore
from tests.dynamodb.test_forgetting import table_url as table_url  # a table of the test's own
from tests.restoring import restored_then_reidentified


def test_a_table_restored_to_its_name_fails_closed_once_reidentified(table_url: str) -> None:
    restore = Restore(table_url)

    def whole_table(phase: str, namespace: str) -> None:
        restore(phase)  # every item: the table deleted and created again

    options = tools.ledger_options(table_url)
    restored_then_reidentified(table_url, "ns", whole_table, **options)
