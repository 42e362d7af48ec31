"""The whole conformance suite against DynamoDB, on dynalite and on DynamoDB Local (each
with an on-disk store), sync and async, through the fault proxy (the ``endpoint_url`` goes through
``ctx.route``), with a kill -9 restart hook (C2) and a forget hook (the table deleted and
created again: an old ledger must fail closed, a new one gets a new store_id)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from ledger_conformance import LedgerConformance
from tests.dynamodb import tools
from tests.servers import dynamodb as servers


class TestDynamoDB(LedgerConformance):
    @pytest.fixture
    def ledger_factory(self, dynamodb_url: str) -> Any:
        return tools.factory(dynamodb_url)

    @pytest.fixture
    def ledger_restart(self, dynamodb_target: servers.Target) -> Callable[[], object] | None:
        server = dynamodb_target.server
        return server.restart if server is not None else None

    @pytest.fixture
    def ledger_forget(self, dynamodb_url: str) -> Callable[[], object]:
        return lambda: tools.forget(dynamodb_url)
