"""C2 and C6 safety: crashes keep spent ids, an unsafe server never proves, a standby
never spends."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from ledger_core.errors import UnsafeStoreConfig
from ledger_core.registry import open_async_ledger, open_ledger
from ledger_postgres import PostgresLedger
from tests.servers.postgres import PostgresServer, ServerUnavailable, standby_of

from .conftest import Opener


def _restartable(server: PostgresServer) -> None:
    if not server.can_restart:
        pytest.skip("the server comes from LEDGER_TEST_POSTGRES_URL: it cannot be restarted here")


def test_immediate_shutdown_keeps_every_spent_id(pg_server: PostgresServer, table: str) -> None:
    _restartable(pg_server)
    ids = [f"crash-{i}" for i in range(150)]
    sync_ledger: Any = open_ledger(pg_server.url, table=table)
    loop = asyncio.new_event_loop()
    async_ledger: Any = loop.run_until_complete(open_async_ledger(pg_server.url, table=table))
    try:
        store_id = sync_ledger.store_id
        for rid in ids[:100]:
            assert sync_ledger.spend(rid) is True
        for rid in ids[100:]:
            assert loop.run_until_complete(async_ledger.spend(rid)) is True
        pg_server.stop("immediate")  # a crash: no shutdown checkpoint, recovery from WAL
        pg_server.start()
        # The same instances (their pooled connections died with the server) ...
        for rid in ids:
            assert sync_ledger.is_spent(rid) is True, rid
        for rid in ids:
            assert loop.run_until_complete(async_ledger.spend(rid)) is False, rid
        # ... and a new one, which sees the same store.
        with open_ledger(pg_server.url, table=table) as again:  # type: ignore[attr-defined]
            assert again.store_id == store_id
            assert all(again.is_spent(rid) for rid in ids)
            assert again.spend("after-crash") is True
    finally:
        sync_ledger.close()
        loop.run_until_complete(async_ledger.aclose())
        loop.close()


@contextlib.contextmanager
def _setting(admin: psycopg.Connection[Any], name: str, value: str) -> Iterator[None]:
    admin.execute(f"ALTER SYSTEM SET {name} = {value}")
    admin.execute("SELECT pg_reload_conf()")
    try:
        yield
    finally:
        admin.execute(f"ALTER SYSTEM RESET {name}")
        admin.execute("SELECT pg_reload_conf()")


def _wait_setting(admin: psycopg.Connection[Any], name: str, value: str) -> None:
    # A reload is asynchronous; new sessions read the file when the postmaster has.
    for _ in range(100):  # bounded: 100 polls, 50 ms apart
        with psycopg.connect(admin.info.dsn, autocommit=True) as conn:
            row = conn.execute("SELECT current_setting(%s)", (name,)).fetchone()
        if row is not None and row[0] == value:
            return
        admin.execute("SELECT pg_sleep(0.05)")
    pytest.fail(f"{name} never became {value}")


def test_fsync_off_never_proves(
    open_pg: Opener, admin: psycopg.Connection[Any], pg_server: PostgresServer
) -> None:
    _restartable(pg_server)  # needs a server of our own to reconfigure
    with _setting(admin, "fsync", "off"):
        _wait_setting(admin, "fsync", "off")
        ledger = open_pg()
        info = ledger.describe()
        assert info.store_id is None
        assert ledger.store_id is None
        assert info.reason is not None
        assert "fsync" in info.reason
        assert ledger.spend("still-recorded") is True  # it records; it only never proves
    _wait_setting(admin, "fsync", "on")
    assert open_pg().store_id is not None


def test_read_only_default_on_a_host_pool_still_spends(
    pg_server: PostgresServer, table: str
) -> None:
    """Each spend on a host's pool is framed ``READ WRITE``, whatever the session says."""
    url = pg_server.url + "?options=" + quote("-c default_transaction_read_only=on")
    with ConnectionPool(url, min_size=1, max_size=2, open=True) as pool:
        ledger = PostgresLedger.from_pool(pool, table=table)
        assert ledger.spend("rw") is True
        assert ledger.spend("rw") is False


@pytest.fixture(scope="module")
def standby(pg_server: PostgresServer) -> Iterator[str]:
    """A hot standby of the session's server, streamed from it; yields its URL."""
    _restartable(pg_server)
    try:
        with standby_of(pg_server) as server:
            yield server.url
    except ServerUnavailable as exc:
        pytest.skip(str(exc))


def test_standby_refuses_with_a_clear_error(open_pg: Opener, standby: str) -> None:
    with pytest.raises(UnsafeStoreConfig, match="standby"):
        open_pg(standby)


def test_standby_host_pool_refuses(standby: str, table: str) -> None:
    with (
        ConnectionPool(standby, min_size=1, max_size=1, open=True) as pool,
        pytest.raises(UnsafeStoreConfig, match="standby"),
    ):
        PostgresLedger.from_pool(pool, table=table)


def test_a_connection_that_lands_on_a_standby_is_refused_per_operation(
    pg_server: PostgresServer, standby: str, table: str
) -> None:
    """Between open and a spend, a failover or a multi-host URL may hand the ledger a
    standby's connection: each operation checks the ``in_hot_standby`` status the server
    reports, before sending anything."""
    ledger: Any = open_ledger(pg_server.url, table=table)
    try:
        with psycopg.connect(standby, autocommit=True) as conn:
            params = (ledger._st.namespace, b"on-standby", b"t" * 16)
            with pytest.raises(UnsafeStoreConfig, match="standby"):
                ledger._on(conn, ledger._st.spend_prepared, params, None, time.monotonic() + 5)
        assert ledger.is_spent("on-standby") is False
    finally:
        ledger.close()
