"""One PostgreSQL server per session; each test gets its own table, in both flavors."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from ledger_conformance.faults import FaultProxy, Toxic
from ledger_core.errors import UnsafeStoreConfig
from ledger_postgres import PostgresLedger
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


@contextmanager
def proxied(server: PostgresServer) -> Iterator[tuple[FaultProxy, str]]:
    """The shipped fault proxy in front of ``server``, and the server's URL through it."""
    with FaultProxy(server.host, server.port) as proxy:
        port = proxy.address[1]
        yield proxy, server.url.replace(f":{server.port}/", f":{port}/")


@contextmanager
def on_open_links(proxy: FaultProxy, toxic: Toxic) -> Iterator[None]:
    """``toxic`` for the connections open now only, as when one link dies alone: the
    first new connection anyone makes (the ledger's settle or re-read, the pool's
    replacement) heals the proxy before it connects, so it goes through."""
    sync_connect = psycopg.Connection.connect.__func__  # type: ignore[attr-defined]
    async_connect = psycopg.AsyncConnection.connect.__func__  # type: ignore[attr-defined]

    def connect(cls: Any, *args: Any, **kwargs: Any) -> Any:
        proxy.heal()
        return sync_connect(cls, *args, **kwargs)

    async def connect_async(cls: Any, *args: Any, **kwargs: Any) -> Any:
        proxy.heal()
        return await async_connect(cls, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(psycopg.Connection, "connect", classmethod(connect))
        patch.setattr(psycopg, "connect", psycopg.Connection.connect)
        patch.setattr(psycopg.AsyncConnection, "connect", classmethod(connect_async))
        proxy.set(toxic)
        yield


def forgotten(ledger: Any) -> None:
    """Every operation of a ledger whose store forgot raises, and keeps raising."""
    with pytest.raises(UnsafeStoreConfig, match="reopen"):
        ledger.spend("spent-before")
    with pytest.raises(UnsafeStoreConfig, match="reopen"):
        ledger.is_spent("spent-before")
    with pytest.raises(UnsafeStoreConfig, match="reopen"):
        ledger.spend("never-seen")


@contextmanager
def host_pool_ledger(server: PostgresServer, table: str) -> Iterator[Any]:
    """A ledger on a host's pool (framed statements) with one spend made, the pool open."""
    with ConnectionPool(server.url, min_size=1, max_size=2, open=True) as pool:
        ledger = PostgresLedger.from_pool(pool, table=table)
        assert ledger.spend("spent-before") is True
        yield ledger
