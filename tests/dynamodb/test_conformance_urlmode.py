"""C4/C5 as ``--ledger-url`` runs them, on dynalite (the suite's own C4/C5 run on both
emulators in ``test_conformance_dynamodb.py``; this pins the URL mode's routing)."""

from __future__ import annotations

from typing import Any

import pytest

from ledger_conformance.clauses.c45_faults import C45Faults
from ledger_conformance.urlmode import URLFactory
from tests.dynamodb import tools
from tests.servers import dynamodb as servers

dynamodb_target = tools.on_emulators(servers.DYNALITE)


class TestDynamoDBURLModeFaults(C45Faults):
    """C4/C5 as ``--ledger-url`` runs them: the suite's URL mode finds the address through
    the backend's ``reroute`` hook (the ``endpoint_url`` in the query), not our factory."""

    @pytest.fixture
    def ledger_factory(self, dynamodb_url: str) -> Any:
        url = tools.with_query(dynamodb_url, **tools.ledger_options(dynamodb_url))
        factory = URLFactory(url, f"url-{tools.RUN}")
        assert factory.routable
        return factory
