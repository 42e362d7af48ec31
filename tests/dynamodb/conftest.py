"""A session-scoped DynamoDB server for the DynamoDB backend's tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.servers import dynamodb as servers

TABLE = "decision-ledger-test"


@pytest.fixture(scope="session")
def dynamodb_target() -> Iterator[servers.Target]:
    try:
        manager = servers.dynamodb_target(TABLE)
        target = manager.__enter__()
    except servers.ServerUnavailable as exc:
        pytest.skip(str(exc))
    try:
        yield target
    finally:
        manager.__exit__(None, None, None)


@pytest.fixture(scope="session")
def dynamodb_url(dynamodb_target: servers.Target) -> str:
    return dynamodb_target.url


@pytest.fixture
def namespace(request: pytest.FixtureRequest) -> str:
    """A namespace of its own for each test, so tests never see each other's ids."""
    return f"t-{request.node.name}"[:200]
