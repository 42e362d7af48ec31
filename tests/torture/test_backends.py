"""A short campaign against every backend with a server here, through the fault proxy,
with kill -9 restarts where the harness owns the server. A correct backend passes:
no double win, no lost spend, no other violation, every call a LedgerError or an answer."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.servers import dynamodb, mongodb, postgres
from tests.servers import redis as redis_servers
from tests.servers.common import serve_or_skip

from . import factories
from .conftest import campaign

TIMEOUT = 2  # seconds: a black hole ends a call quickly


def _passes(
    url: str | None, *, factory: str | None = None, restart: object = None, routed: bool = True
) -> None:
    result, text = campaign(url=url, factory=factory, restart=restart, restarts=1 if restart else 0)
    verdict, totals = result.verdict, result.totals
    assert result.code == 0, text
    assert verdict.double_wins == 0, text
    assert verdict.lost_spends == 0, text
    assert verdict.acknowledged > 0, text
    assert verdict.final_reads >= verdict.acknowledged, text
    assert totals.routed is routed, text
    if routed:
        assert totals.faults > 0, text
    if restart is not None:
        assert totals.restarts == 2, text  # one scheduled, one before the final read


@pytest.fixture(scope="module")
def disk_dir() -> Iterator[Path]:
    """On a disk, not tmpfs: a SQLite ledger on tmpfs never proves."""
    root = Path(__file__).resolve().parents[2] / ".pytest-tmp"
    root.mkdir(exist_ok=True)
    path = Path(tempfile.mkdtemp(prefix="torture-sqlite-", dir=root))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_sqlite(disk_dir: Path) -> None:
    """No network address: the campaign says faults were not injected, and still checks."""
    _passes(f"sqlite:///{disk_dir}/ledger.db", routed=False)


@pytest.fixture(scope="module")
def redis_server() -> Iterator[redis_servers.RedisServer]:
    yield from serve_or_skip(lambda: redis_servers.local_redis(redis_servers.DURABLE))


def test_redis_with_kill9_restart(redis_server: redis_servers.RedisServer) -> None:
    url = f"{redis_server.url}?timeout={TIMEOUT}&connect_timeout={TIMEOUT}"
    _passes(url, restart=redis_server.restart)


@pytest.fixture(scope="module")
def pg_server() -> Iterator[postgres.PostgresServer]:
    yield from serve_or_skip(postgres.postgres_server)


def test_postgres_with_crash_restart(pg_server: postgres.PostgresServer) -> None:
    restart = (lambda: pg_server.restart("immediate")) if pg_server.can_restart else None
    _passes(f"{pg_server.url}?timeout={TIMEOUT}", restart=restart)


@pytest.fixture(scope="module")
def mongo() -> Iterator[mongodb.Found]:
    yield from serve_or_skip(mongodb.mongodb)


def test_mongodb(mongo: mongodb.Found) -> None:
    options = {"timeout": str(TIMEOUT), **mongo.proof_options}
    query = "&".join(f"{k}={v}" for k, v in options.items())
    _passes(f"{mongo.url}{'&' if '?' in mongo.url else '?'}{query}")


@pytest.fixture(scope="module")
def dynamo() -> Iterator[dynamodb.Target]:
    yield from serve_or_skip(lambda: dynamodb.dynamodb_target("ledger-torture"))


def test_dynamodb(dynamo: dynamodb.Target, monkeypatch: pytest.MonkeyPatch) -> None:
    """Through a factory (``tests.torture.factories:dynamodb``), kill -9 restarts."""
    monkeypatch.setenv(factories.DYNAMODB_ENV, dynamo.url)
    monkeypatch.setenv(factories.NAMESPACE_ENV, f"torture-{os.urandom(4).hex()}")
    restart = dynamo.server.restart if dynamo.server is not None else None
    _passes(None, factory="tests.torture.factories:dynamodb", restart=restart)
