"""The whole conformance suite against DynamoDB, on dynalite or on DynamoDB Local (each
with an on-disk store; one per session), sync and async, through the fault proxy (the
``endpoint_url`` goes through ``ctx.route``), with a kill -9 restart hook (C2) and a
forget hook (every item deleted in place: an old ledger must fail closed, a new one gets
a new store_id)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from ledger_conformance import LedgerConformance
from tests.dynamodb import tools
from tests.servers import dynamodb as servers

# One emulator per pytest session: the suite keeps session state (acknowledged spends, the
# waiting clause's ids) that two servers in one session would mix. CI runs it again with
# LEDGER_TEST_DYNAMODB_SUITE=dynamodb-local (.ci/run).
SUITE_ENV = "LEDGER_TEST_DYNAMODB_SUITE"
dynamodb_target = tools.on_emulators(os.environ.get(SUITE_ENV, servers.DYNALITE))


class TestDynamoDB(LedgerConformance):
    @pytest.fixture
    def ledger_factory(self, dynamodb_url: str) -> Any:
        return tools.factory(dynamodb_url)

    @pytest.fixture
    def ledger_restart(self, dynamodb_target: servers.Target) -> Callable[[], object] | None:
        server = dynamodb_target.server
        return server.restart if server is not None else None

    @pytest.fixture
    def ledger_forget(self, dynamodb_url: str) -> Iterator[Callable[[], object]]:
        """The stronger forget, in place: every item deleted (the genesis items with the
        records), the table kept, so only the genesis proof can tell (a deleted table
        also changes TableId and creation time); test_forgetting.py re-creates it too."""
        admin = tools.admin_client(dynamodb_url)
        yield lambda: tools.delete_every_item(dynamodb_url, admin)
        admin.close()
