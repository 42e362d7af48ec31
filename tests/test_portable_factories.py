"""Every shipped backend configuration's suite factory is sent to a new interpreter by
pickle: a closure cannot be, and the suite then leaves its spawned-interpreter parts out
(C1's spawned racers, C3's new interpreters, M1's calls from one). Each factory here is
what that configuration's ``ledger_factory`` fixture returns, built on a stand-in
address; the suite itself runs them in ``tests/<store>/test_conformance_*.py``."""

from __future__ import annotations

import functools
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.dynamodb import tools as dynamodb
from tests.mongodb.test_conformance_mongodb import motor_factory, url_factory
from tests.postgres.test_conformance_postgres import host_pool_factory
from tests.postgres.test_conformance_postgres import url_factory as postgres_url_factory
from tests.redis.test_conformance_redis import cluster_factory, standalone_factory
from tests.sqlite.test_conformance_sqlite import open_sqlite
from tests.test_conformance_bridge import open_bridge
from tests.test_conformance_memory import memory_factory
from tests.test_conformance_minimal import open_minimal

PROOF = {"durability": "process"}
ADDRESS = ("127.0.0.1", 5432, "postgres", "ledger")
FACTORIES: dict[str, Callable[[], Any]] = {
    "memory": lambda: memory_factory,
    "sqlite": lambda: functools.partial(open_sqlite, Path("/x/ledger.db")),
    "bridge": lambda: functools.partial(open_bridge, Path("/x/old.db"), Path("/x/new.db")),
    "minimal": lambda: functools.partial(open_minimal, Path("/x/ledger.db")),
    "postgres url": lambda: postgres_url_factory(ADDRESS),
    "postgres host pool": lambda: host_pool_factory(ADDRESS),
    "redis": lambda: standalone_factory("redis://127.0.0.1:6379/0", durability="process"),
    "redis cluster": lambda: cluster_factory("redis://127.0.0.1:7000"),
    "mongodb pymongo": lambda: url_factory("mongodb://127.0.0.1:27017/x", "c", PROOF),
    "mongodb motor": lambda: motor_factory("mongodb://127.0.0.1:27017/x", "c", PROOF),
    "dynamodb": lambda: dynamodb.factory("dynamodb://t?endpoint_url=http://127.0.0.1:8000"),
}


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_the_factory_reaches_a_new_interpreter(name: str) -> None:
    """By name, not by value: what comes back is the same module-level callable with the
    same arguments, and keeps what the suite reads from it (``offers_create``)."""
    factory = FACTORIES[name]()
    copy = pickle.loads(pickle.dumps(factory))
    if isinstance(factory, functools.partial):
        assert copy.func is factory.func
        assert copy.args == factory.args
        assert copy.keywords == factory.keywords
    else:
        assert copy is factory
    assert getattr(copy, "offers_create", False) == getattr(factory, "offers_create", False)
