"""A failover never turns a spent id back into an unspent one under the same store_id.

Real servers: a primary, a streaming standby behind a relay on loopback (the
replication link can be partitioned: the relay swallows the stream, the primary still
counts a connected standby), ``kill -9`` of the primary, ``pg_ctl promote``. The client
URL names both hosts with ``target_session_attrs=read-write``, as a host's would, so a
ledger opened before the failover reaches the promoted standby by itself.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import psycopg
import pytest

from ledger_conformance.faults import FaultProxy, Toxic
from ledger_core.doctor import FAIL
from ledger_core.errors import LedgerError, UnsafeStoreConfig
from ledger_core.registry import open_ledger
from ledger_postgres.replication import (
    Standby,
    Topology,
    parse_sync_names,
    refusals,
    spend_condition,
)
from tests.servers.postgres import (
    PostgresServer,
    ServerUnavailable,
    local_server,
    standby_of,
)

from .conftest import Opener

IDS = [f"failover-{i:03d}" for i in range(300)]
WAIT = 30.0  # seconds: a bound on waiting for the server, never an asserted duration


def _replicating(primary: PostgresServer, sync_state: str) -> None:
    """Until the primary reports its one standby streaming in ``sync_state``."""
    deadline = time.monotonic() + WAIT
    with psycopg.connect(primary.url, autocommit=True) as conn:
        while True:
            rows = conn.execute("SELECT state, sync_state FROM pg_stat_replication").fetchall()
            if rows == [("streaming", sync_state)]:
                return
            assert time.monotonic() < deadline, f"standby never streamed {sync_state}: {rows}"
            time.sleep(0.05)


def _replayed(primary: PostgresServer, standby: PostgresServer) -> None:
    """Until the standby has replayed everything the primary wrote so far (the ledger's
    table included): a partition after this loses only what comes after it."""
    with psycopg.connect(primary.url, autocommit=True) as conn:
        lsn = conn.execute("SELECT pg_current_wal_lsn()").fetchone()
    deadline = time.monotonic() + WAIT
    with psycopg.connect(standby.url, autocommit=True) as conn:
        while True:
            row = conn.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", lsn).fetchone()
            if row == (True,):
                return
            assert time.monotonic() < deadline, f"the standby never replayed up to {lsn}"
            time.sleep(0.05)


@contextmanager
def _pair(
    sync: bool, early: list[Any] | None = None
) -> Iterator[tuple[PostgresServer, PostgresServer, FaultProxy, str]]:
    """A primary, a relay, a standby streaming through it; the two-host client URL.
    ``early``: a ledger is opened on the primary alone first, and appended."""
    with ExitStack() as stack:
        try:
            primary = stack.enter_context(local_server())
        except ServerUnavailable as exc:
            pytest.skip(str(exc))
        if early is not None:
            ledger: Any = open_ledger(primary.url)
            stack.callback(ledger.close)
            early.append(ledger)
        relay = stack.enter_context(FaultProxy(primary.host, primary.port))
        standby = stack.enter_context(standby_of(primary, name="sb", via=relay.address))
        if sync:
            with psycopg.connect(primary.url, autocommit=True) as conn:
                conn.execute("ALTER SYSTEM SET synchronous_standby_names = 'FIRST 1 (sb)'")
                conn.execute("SELECT pg_reload_conf()")
        _replicating(primary, "sync" if sync else "async")
        hosts = f"host={primary.host},{standby.host}&port={primary.port},{standby.port}"
        yield primary, standby, relay, f"{primary.url}?{hosts}&target_session_attrs=read-write"


def _open(url: str, **options: Any) -> Any:
    return open_ledger(url, **options)


def _fail_over(primary: PostgresServer, standby: PostgresServer) -> None:
    primary.kill()
    standby.promote()


def test_an_async_standby_never_proves_and_its_failover_loses_only_unproven_spends() -> None:
    early: list[Any] = []
    with _pair(sync=False, early=early) as (primary, standby, relay, url):
        # Opened on the lone primary, it proves; each spend proves the policy again, so
        # once the standby attaches it refuses to spend (nothing recorded), never for
        # good; reads go on.
        assert early[0].store_id is not None
        with pytest.raises(UnsafeStoreConfig, match="standbys no longer keep"):
            early[0].spend(IDS[0])
        assert early[0].is_spent(IDS[0]) is False
        ledger = _open(url)
        info = ledger.describe()
        assert info.store_id is None
        assert info.reason is not None
        assert "standby 'sb' is async" in info.reason
        refused = [c for c in ledger.doctor_checks() if c.status == FAIL]
        assert any("synchronous_standby_names" in c.fix for c in refused), refused
        relay.set(Toxic.BLACKHOLE)  # the primary still counts a connected standby
        assert all(ledger.spend(rid) is True for rid in IDS)  # recorded, never proven
        _fail_over(primary, standby)
        after = _open(url)
        try:
            assert after.store_id is not None  # the promoted standby stands alone
            # The repro: every spend made during the partition is gone. None of
            # them was ever acknowledged under a store_id, so no host could rely on it.
            assert sum(after.is_spent(rid) for rid in IDS) == 0
        finally:
            after.close()
            ledger.close()


def test_new_store_id_mode_turns_a_lossy_failover_into_another_store() -> None:
    with _pair(sync=False) as (primary, standby, relay, url):
        ledger = _open(url, failover="new-store-id")
        before = ledger.store_id
        assert before is not None
        assert before.startswith("postgres-tl1:")
        _replayed(primary, standby)  # the table exists on both: only the spends are lost
        relay.set(Toxic.BLACKHOLE)
        assert all(ledger.spend(rid) is True for rid in IDS)
        _fail_over(primary, standby)
        # The old instance reaches the promoted standby (another timeline): it fails
        # closed, and stays failed, rather than read or spend there under `before`.
        for _ in range(2):
            with pytest.raises(UnsafeStoreConfig, match="reopen"):
                ledger.is_spent(IDS[0])
            with pytest.raises(UnsafeStoreConfig, match="reopen"):
                ledger.spend(IDS[1])
        after = _open(url, failover="new-store-id")
        try:
            assert after.store_id is not None
            assert after.store_id.startswith("postgres-tl2:")
            # Lost in the failover, and spendable again only under another store_id:
            # a host that minted a request under `before` asks again (H5).
            assert after.spend(IDS[0]) is True
        finally:
            after.close()
            ledger.close()


def test_a_sync_standby_failover_keeps_every_spend_and_the_store_id() -> None:
    with _pair(sync=True) as (primary, standby, relay, url):
        ledger = _open(url)
        short = _open(url, timeout=1)
        store_id = ledger.store_id
        assert store_id is not None
        assert short.store_id == store_id
        assert all(ledger.spend(rid) is True for rid in IDS)
        relay.set(Toxic.BLACKHOLE)
        with pytest.raises(LedgerError):  # its commit waits for the standby: never True
            short.spend("partitioned")
        _fail_over(primary, standby)
        assert all(ledger.is_spent(rid) is True for rid in IDS)
        assert not any(ledger.spend(rid) for rid in IDS)
        again = _open(url)
        try:
            assert again.store_id == store_id
            assert again.is_spent(IDS[-1]) is True
        finally:
            again.close()
            short.close()
            ledger.close()


def test_an_idle_physical_slot_refuses_spends_until_dropped(
    open_pg: Opener, admin: psycopg.Connection[Any]
) -> None:
    ledger = open_pg()
    before = ledger.store_id
    assert before is not None
    assert ledger.spend("a") is True
    slot = f"ledger_idle_{uuid.uuid4().hex[:8]}"
    admin.execute("SELECT pg_create_physical_replication_slot(%s)", (slot,))
    try:
        with pytest.raises(UnsafeStoreConfig, match="standbys no longer keep"):
            ledger.spend("b")
        assert ledger.is_spent("a") is True
        info = open_pg().describe()
        assert info.store_id is None
        assert info.reason is not None
        assert slot in info.reason
    finally:
        admin.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
    assert ledger.spend("b") is True  # never failed for good
    assert ledger.store_id == before


def _topology(names: str, *states: str | None) -> Topology:
    return Topology(
        names, tuple(Standby(f"s{i}", "streaming", s) for i, s in enumerate(states)), ()
    )


@pytest.mark.parametrize(
    ("names", "states", "proves"),
    [
        ("", (), True),
        ("", ("async",), False),
        ("s0", ("sync",), True),
        ("FIRST 1 (s0, s1)", ("sync", "potential"), False),
        ("FIRST 2 (s0, s1)", ("sync", "sync"), True),
        ("ANY 1 (s0, s1)", ("quorum", "quorum"), False),
        ("ANY 2 (s0, s1)", ("quorum", "quorum"), True),
        ("s0", ("sync", None), False),  # a role that may not see the details
    ],
)
def test_which_topologies_prove(names: str, states: tuple[str | None, ...], proves: bool) -> None:
    found = refusals(_topology(names, *states))
    assert (not found) is proves, found
    assert all(fix for _, fix in found)


def test_synchronous_standby_names_forms() -> None:
    assert parse_sync_names("") == parse_sync_names("  ")
    assert parse_sync_names("a, b") == parse_sync_names("FIRST 1 (a, b)")
    assert parse_sync_names("2 (a, b)").method == "FIRST"
    config = parse_sync_names('any 2 ("a""q", b)')
    assert (config.method, config.num, config.names) == ("ANY", 2, ('a"q', "b"))
    # Under ANY n, n is the setting's: a spend proves it is unchanged.
    assert "synchronous_standby_names" in spend_condition(_topology("ANY 1 (s0)", "quorum"))
    assert "synchronous_standby_names" not in spend_condition(_topology("s0", "sync"))
