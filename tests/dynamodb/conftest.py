"""The DynamoDB backend's servers: dynalite and DynamoDB Local, each started once per
session on first use; a test runs on both unless its module narrows it
(``dynamodb_target = tools.on_emulators(DYNALITE)``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.dynamodb import tools
from tests.servers import dynamodb as servers

TABLE = "decision-ledger-test"


@pytest.fixture(scope="session")
def dynamodb_pool() -> Iterator[servers.Pool]:
    pool = servers.Pool(TABLE)
    yield pool
    pool.close()


dynamodb_target = tools.on_emulators(*servers.EMULATORS)


@pytest.fixture
def dynamodb_url(dynamodb_target: servers.Target) -> str:
    return dynamodb_target.url


@pytest.fixture
def namespace(request: pytest.FixtureRequest) -> str:
    """A namespace of its own for each test, so tests never see each other's ids."""
    return f"t-{tools.RUN}-{request.node.name}"[:200]
