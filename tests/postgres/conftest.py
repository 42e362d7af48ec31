"""One PostgreSQL server per session; each test gets its own table, in both flavors."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

from tests.flavors import Flavored
from tests.servers.postgres import PostgresServer, ServerUnavailable, postgres_server


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PostgresServer]:
    try:
        with postgres_server() as server:
            yield server
    except ServerUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture
def admin(pg_server: PostgresServer) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(pg_server.url, autocommit=True) as conn:
        yield conn


@pytest.fixture
def table() -> str:
    """A table of this test's own, so tests never see each other's ids."""
    return f"t_{uuid.uuid4().hex[:12]}"


Opener = Callable[..., Flavored]


@pytest.fixture(params=["sync", "async"])
def flavor(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def open_pg(flavor: str, pg_server: PostgresServer, table: str) -> Iterator[Opener]:
    """``open_pg(url=None, **options)``: a ledger on this test's table, closed after."""
    opened: list[Flavored] = []

    def opener(url: str | None = None, **options: Any) -> Flavored:
        options.setdefault("table", table)
        ledger = Flavored(flavor, url or pg_server.url, **options)
        opened.append(ledger)
        return ledger

    try:
        yield opener
    finally:
        for ledger in opened:
            ledger.dispose()
