"""Each backend migrates to each other backend (issue 13), on real servers."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from ledger_core import migrate, migration_state, open_ledger
from tests.dynamodb import tools as dynamodb_tools
from tests.servers import dynamodb as dynamodb_servers
from tests.servers import mongodb as mongo_servers
from tests.servers import postgres as pg_servers
from tests.servers import redis as redis_servers
from tests.servers.common import ServerUnavailable

BACKENDS = ["sqlite", "postgres", "redis", "mongodb", "dynamodb"]
IDS = ["a", "*", "[x]", "nul\x00:c", "é", "x" * 1024, *[f"id-{n}" for n in range(40)]]
Opener = Callable[[], Any]


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Opener]]:
    """One opener per backend: each call opens a ledger on a new, empty store."""
    with ExitStack() as stack:
        try:
            pg = stack.enter_context(pg_servers.postgres_server())
            redis_url = stack.enter_context(redis_servers.redis_url())
            mongo = stack.enter_context(mongo_servers.mongodb())
            dynamo = stack.enter_context(dynamodb_servers.dynamodb_target("migrate-matrix"))
        except ServerUnavailable as exc:
            pytest.skip(str(exc))
        root = tmp_path_factory.mktemp("matrix")

        def name() -> str:
            return f"m{uuid.uuid4().hex[:10]}"

        openers: dict[str, Opener] = {
            "sqlite": lambda: open_ledger(f"sqlite:///{Path(root) / name()}.db"),
            "postgres": lambda: open_ledger(pg.url, table=name()),
            "redis": lambda: open_ledger(redis_url, namespace=name()),
            "mongodb": lambda: open_ledger(mongo.url, namespace=name(), **mongo.proof_options),
            "dynamodb": lambda: open_ledger(
                dynamo.url, namespace=name(), **dynamodb_tools.ledger_options(dynamo.url)
            ),
        }
        yield openers


@pytest.mark.parametrize("target_kind", BACKENDS)
@pytest.mark.parametrize("source_kind", BACKENDS)
def test_every_backend_migrates_to_every_backend(
    servers: dict[str, Opener], source_kind: str, target_kind: str
) -> None:
    source, target = servers[source_kind](), servers[target_kind]()
    try:
        for request_id in IDS:
            assert source.spend(request_id) is True
        report = migrate(source, target)
        assert (report.copied, report.verified) == (len(IDS), len(IDS))
        assert sorted(target.spent_ids()) == sorted(IDS)
        assert migration_state(target) is None
        assert source.store_id is not None
        assert report.lineage == source.store_id
        if hasattr(target, "lineage"):
            assert target.lineage() == [source.store_id]
    finally:
        target.close()
        source.close()
