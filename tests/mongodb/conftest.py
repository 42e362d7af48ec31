"""Session-scoped MongoDB servers for the MongoDB backend's tests (tests/servers/mongodb.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from pymongo import MongoClient

from ledger_mongodb.options import DEFAULT_DATABASE
from tests.servers import mongodb as servers
from tests.servers.common import serve_or_skip


def _db(client: MongoClient[dict[str, Any]]) -> Any:
    return client.get_default_database(DEFAULT_DATABASE)


@pytest.fixture(scope="session")
def mongo() -> Iterator[servers.Found]:
    """The MongoDB this machine offers (URL, mongod, container, else nx-27017)."""
    yield from serve_or_skip(servers.mongodb)


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


@pytest.fixture
def client(mongo_url: str) -> Iterator[MongoClient[dict[str, Any]]]:
    c: MongoClient[dict[str, Any]] = MongoClient(mongo_url, serverSelectionTimeoutMS=5000)
    yield c
    c.close()


@pytest.fixture
def coll(request: pytest.FixtureRequest, client: MongoClient[dict[str, Any]]) -> Iterator[str]:
    """A collection of the test's own, dropped before and after."""
    name = f"t_{request.node.name}"[:60].replace("[", "_").replace("]", "")
    db = _db(client)
    db.drop_collection(name)
    yield name
    db.drop_collection(name)
