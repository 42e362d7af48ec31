"""Session-scoped MongoDB servers for the MongoDB backend's tests (tests/servers/mongodb.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.servers import mongodb as servers


@pytest.fixture(scope="session")
def mongo() -> Iterator[servers.Found]:
    """The MongoDB this machine offers (URL, mongod, container, else nx-27017)."""
    try:
        manager = servers.mongodb()
        found = manager.__enter__()
    except servers.ServerUnavailable as exc:
        pytest.skip(str(exc))
    try:
        yield found
    finally:
        manager.__exit__(None, None, None)


@pytest.fixture(scope="session")
def mongo_url(mongo: servers.Found) -> str:
    return mongo.url


@pytest.fixture(scope="session")
def ledger_url(mongo: servers.Found) -> str:
    """The URL ledgers open: on nx-27017 with ``durability=process``, so they prove."""
    extra = "".join(f"&{k}={v}" for k, v in mongo.proof_options.items())
    return mongo.url + extra if "?" in mongo.url else mongo.url + "?" + extra.lstrip("&")


@pytest.fixture
def namespace(request: pytest.FixtureRequest) -> str:
    """A namespace of its own for each test, so tests never see each other's ids."""
    return f"t-{request.node.name}"[:200]
