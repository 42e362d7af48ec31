"""A target namespace proves only after every run started for it, from every source,
finished and verified: the five ways it did not, on real servers.

Each scenario runs once per target backend; the source rotates, so every backend is a
source once and a target once (``PAIRS``), and the cheap third store is SQLite.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from ledger_core import MemoryLedger, migrate, open_ledger
from ledger_core.cli import main
from ledger_core.migrate import (
    IncompleteMigration,
    MigrationInterrupted,
    Progress,
    UnfinishedRun,
)
from tests.cli_stops import press_ctrl_c_after
from tests.dynamodb import tools as dynamodb_tools
from tests.servers import dynamodb as dynamodb_servers
from tests.servers import mongodb as mongo_servers
from tests.servers import postgres as pg_servers
from tests.servers import redis as redis_servers
from tests.servers.common import ServerUnavailable

BACKENDS = ["sqlite", "postgres", "redis", "mongodb", "dynamodb"]
PAIRS = list(zip(BACKENDS, BACKENDS[1:] + BACKENDS[:1], strict=True))
IDS = [f"id-{n:03d}" for n in range(30)]


@dataclass
class Store:
    """One empty ledger namespace: its URL (options in the query) and its host-made
    ledger (``direct``: a constructor, ``from_client`` or ``from_pool``)."""

    url: str
    namespace: str
    direct: Callable[[], Any]
    opened: list[Any] = field(default_factory=list)

    def open(self, **options: Any) -> Any:
        ledger = open_ledger(self.url, namespace=self.namespace, **options)
        self.opened.append(ledger)
        return ledger

    def host_ledger(self) -> Any:
        ledger = self.direct()
        self.opened.append(ledger)
        return ledger


def _query(url: str, options: dict[str, str]) -> str:
    if not options:
        return url
    return f"{url}{'&' if '?' in url else '?'}{urlencode(options)}"


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[str], Store]]:
    with ExitStack() as stack:
        try:
            pg = stack.enter_context(pg_servers.postgres_server())
            redis_url = stack.enter_context(redis_servers.redis_url())
            mongo = stack.enter_context(mongo_servers.mongodb())
            dynamo = stack.enter_context(dynamodb_servers.dynamodb_target("migrate-runs"))
        except ServerUnavailable as exc:
            pytest.skip(str(exc))
        root = Path(tmp_path_factory.mktemp("runs"))
        made: list[Store] = []

        def make(kind: str) -> Store:
            name = f"r{uuid.uuid4().hex[:10]}"
            store = _make(kind, name)
            made.append(store)
            return store

        def _make(kind: str, name: str) -> Store:
            if kind == "sqlite":
                from ledger_sqlite import SQLiteLedger

                path = root / f"{name}.db"
                return Store(f"sqlite:///{path}", name, lambda: SQLiteLedger(path, namespace=name))
            if kind == "postgres":
                from psycopg_pool import ConnectionPool

                from ledger_postgres import PostgresLedger

                def from_pool() -> Any:
                    pool = stack.enter_context(ConnectionPool(pg.url, min_size=1, max_size=2))
                    return PostgresLedger.from_pool(pool, table=name, namespace=name)

                return Store(_query(pg.url, {"table": name}), name, from_pool)
            if kind == "redis":
                import redis

                from ledger_redis import RedisLedger

                def from_redis() -> Any:
                    client = redis.Redis.from_url(redis_url)
                    stack.callback(client.close)
                    return RedisLedger.from_client(client, namespace=name)

                return Store(redis_url, name, from_redis)
            if kind == "mongodb":
                import pymongo

                from ledger_mongodb import MongoLedger

                def from_mongo() -> Any:
                    client: Any = pymongo.MongoClient(mongo.url)
                    stack.callback(client.close)
                    return MongoLedger.from_client(client, namespace=name, **mongo.proof_options)

                return Store(_query(mongo.url, mongo.proof_options), name, from_mongo)
            from ledger_dynamodb import DynamoDBLedger

            options = dynamodb_tools.ledger_options(dynamo.url)
            table, _ = dynamodb_tools.url_parts(dynamo.url)

            def from_boto() -> Any:
                client = dynamodb_tools.admin_client(dynamo.url)
                durability = {k: v for k, v in options.items() if k == "durability"}
                return DynamoDBLedger.from_client(client, table, namespace=name, **durability)

            return Store(_query(dynamo.url, options), name, from_boto)

        yield make
        for store in made:
            for ledger in store.opened:
                ledger.close()


def _stop(p: Progress) -> None:
    raise KeyboardInterrupt


def _interrupted(source: Any, target: Any, **options: Any) -> MigrationInterrupted:
    with pytest.raises(MigrationInterrupted) as stopped:
        migrate(source, target, batch=10, progress=_stop, **options)
    return stopped.value


def _filled(store: Store) -> Any:
    ledger = store.open()
    for request_id in IDS:
        assert ledger.spend(request_id) is True
    return ledger


@pytest.mark.parametrize(("source_kind", "target_kind"), PAIRS)
def test_a_merge_never_supersedes_an_unfinished_run(
    stores: Callable[[str], Store], source_kind: str, target_kind: str
) -> None:
    """OLD -> NEW interrupted, then OTHER -> NEW --merge: refused, naming the command
    that finishes OLD's run; NEW refuses every way of opening it until then."""
    old, new, other = stores(source_kind), stores(target_kind), stores("sqlite")
    source, target = _filled(old), new.open(allow_incomplete=True)
    merged = other.open()
    merged.spend("other-id")
    _interrupted(source, target)
    with pytest.raises(UnfinishedRun, match=r"run 1 .*never finished.*decision-ledger migrate"):
        migrate(merged, target, merge=True)
    with pytest.raises(IncompleteMigration):
        new.open()
    with pytest.raises(IncompleteMigration):
        new.host_ledger().spend(IDS[-1])  # from_client / from_pool / a constructor
    assert migrate(source, target).resumed
    assert migrate(merged, target, merge=True).copied == 1
    ledger = new.open()
    assert ledger.store_id is not None
    assert ledger.spend(IDS[-1]) is False
    assert new.host_ledger().spend("other-id") is False


@pytest.mark.parametrize("target_kind", BACKENDS)
def test_a_source_that_never_proves_is_named_by_its_run(
    stores: Callable[[str], Store], target_kind: str
) -> None:
    """Two sources without a store_id: the second never resumes the first one's run."""
    new = stores(target_kind)
    old, other = MemoryLedger(), MemoryLedger()
    for request_id in IDS:
        old.spend(request_id)
    other.spend("other-id")
    target = new.open(allow_incomplete=True)
    stopped = _interrupted(old, target)
    assert stopped.resume
    with pytest.raises(UnfinishedRun, match=f"run nonce {stopped.resume}.*--resume"):
        migrate(other, target)
    with pytest.raises(IncompleteMigration):
        new.open()
    report = migrate(old, target, resume=stopped.resume)
    assert report.resumed
    assert (report.copied, report.already_present) == (20, 10)
    assert new.open().spend(IDS[-1]) is False


@pytest.mark.parametrize("target_kind", BACKENDS)
def test_all_namespaces_marks_every_target_namespace_first(
    stores: Callable[[str], Store],
    target_kind: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Ctrl-C while the second of three namespaces copies: the third, never reached,
    is marked too (it refuses to open, store-id and lineage say so); a re-run ends it."""
    old, new = stores("sqlite"), stores(target_kind)
    from ledger_sqlite import SQLiteLedger

    path = old.url.removeprefix("sqlite:///")
    names = ["default", f"{old.namespace}-1", f"{old.namespace}-2"]  # default: the file's own
    for name in names:
        SQLiteLedger(path, namespace=name).spend_many(IDS)
    press_ctrl_c_after(monkeypatch, 2)
    assert main(["migrate", old.url, new.url, "--all-namespaces"]) == 130
    assert "every target namespace is marked" in capsys.readouterr().err
    third = ["--namespace", names[2]]
    with pytest.raises(IncompleteMigration):
        open_ledger(new.url, namespace=names[2])
    assert main(["store-id", new.url, *third]) == 3
    assert main(["lineage", new.url, *third]) == 1
    assert "incomplete: run 1 from " in capsys.readouterr().out
    monkeypatch.undo()
    assert main(["migrate", old.url, new.url, "--all-namespaces"]) == 0
    for name in names:
        ledger = open_ledger(new.url, namespace=name)
        new.opened.append(ledger)
        assert ledger.spend(IDS[0]) is False


@pytest.mark.parametrize(("source_kind", "target_kind"), PAIRS)
def test_lineage_and_host_made_ledgers_see_an_unfinished_run(
    stores: Callable[[str], Store],
    source_kind: str,
    target_kind: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``lineage`` names the run (exit 1), and a ledger the host makes itself (a
    constructor, ``from_client``, ``from_pool``) refuses to answer as ``open_ledger`` does."""
    old, new = stores(source_kind), stores(target_kind)
    _interrupted(_filled(old), new.open(allow_incomplete=True))
    with pytest.raises(IncompleteMigration):
        new.host_ledger().is_spent(IDS[-1])
    capsys.readouterr()
    assert main(["lineage", new.url, "--namespace", new.namespace]) == 1
    out = capsys.readouterr().out
    assert "incomplete: run 1 from " in out
    assert ", started 2" in out
    assert "never migrated into" not in out
