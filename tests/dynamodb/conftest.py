"""A session-scoped DynamoDB server for the DynamoDB backend's tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.servers import dynamodb as servers
from tests.servers.common import serve_or_skip

TABLE = "decision-ledger-test"


@pytest.fixture(scope="session")
def dynamodb_target() -> Iterator[servers.Target]:
    yield from serve_or_skip(lambda: servers.dynamodb_target(TABLE))


@pytest.fixture(scope="session")
def dynamodb_url(dynamodb_target: servers.Target) -> str:
    return dynamodb_target.url


@pytest.fixture
def namespace(request: pytest.FixtureRequest) -> str:
    """A namespace of its own for each test, so tests never see each other's ids."""
    return f"t-{request.node.name}"[:200]
