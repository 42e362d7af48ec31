"""One PostgreSQL server per session; each test gets its own table, in both flavors."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

from ledger_core.protocol import LedgerInfo
from ledger_core.registry import open_async_ledger, open_ledger
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


class Facade:
    """A sync face on either flavor, so one test body checks both (C9)."""

    def __init__(self, ledger: Any, runner: asyncio.AbstractEventLoop | None) -> None:
        self.ledger = ledger
        self._runner = runner

    def _call(self, result: Any) -> Any:
        return self._runner.run_until_complete(result) if self._runner is not None else result

    def spend(self, request_id: Any) -> bool:
        return bool(self._call(self.ledger.spend(request_id)))

    def is_spent(self, request_id: Any) -> bool:
        return bool(self._call(self.ledger.is_spent(request_id)))

    @property
    def store_id(self) -> str | None:
        value: str | None = self.ledger.store_id
        return value

    def describe(self) -> LedgerInfo:
        info: LedgerInfo = self.ledger.describe()
        return info

    def close(self) -> None:
        if self._runner is not None:
            self._runner.run_until_complete(self.ledger.aclose())
        else:
            self.ledger.close()


Opener = Callable[..., Facade]


@pytest.fixture(params=["sync", "async"])
def flavor(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def open_pg(flavor: str, pg_server: PostgresServer, table: str) -> Iterator[Opener]:
    """``open_pg(url=None, **options)``: a ledger on this test's table, closed after."""
    runner = asyncio.new_event_loop() if flavor == "async" else None
    opened: list[Facade] = []

    def opener(url: str | None = None, **options: Any) -> Facade:
        options.setdefault("table", table)
        target = url or pg_server.url
        ledger: Any
        if runner is not None:
            ledger = runner.run_until_complete(open_async_ledger(target, **options))
        else:
            ledger = open_ledger(target, **options)
        facade = Facade(ledger, runner)
        opened.append(facade)
        return facade

    try:
        yield opener
    finally:
        for facade in opened:
            facade.close()
        if runner is not None:
            runner.close()
