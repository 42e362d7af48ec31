"""Fork safety (issue 8, item 1): a ledger opened and used in a parent, then forked.

The repro: ``pool_max=1&timeout=2``, one spend in the parent, six children forked, each
spending ids 0-99 in its own shuffled order, all released at once. Sharing the
parent's connection gave some ids ``True`` two or three times, hung children (the
deadline thread does not exist in a child) and ``prepared statement "_pg3_0" already
exists``. A child must build its own connections and watchdog, and never touch (nor
close) the parent's.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from ledger_conformance.faults import Toxic
from ledger_core.registry import open_async_ledger, open_ledger
from ledger_postgres import AsyncPostgresLedger, PostgresLedger
from tests.servers.postgres import PostgresServer

from .conftest import proxied

CHILDREN = 6
IDS = [f"fork-{i}" for i in range(100)]
BOUND = 60.0  # seconds for all children; hung children are killed and fail the test


def _fork_all(work: Callable[[int], Any], tmp: Path, children: int = CHILDREN) -> list[Any]:
    """Fork ``children`` processes, release them at once (one pipe, one write), and
    collect what each ``work(i)`` returned (or the exception it raised)."""
    start_r, start_w = os.pipe()
    pids = []
    for i in range(children):
        pid = os.fork()
        if pid == 0:  # the child: never returns into pytest
            code = 1
            try:
                os.close(start_w)
                os.read(start_r, 1)
                result: Any = {"ok": work(i)}
                code = 0
            except BaseException as exc:  # reported to the parent, which fails the test
                result = {"error": f"{type(exc).__name__}: {exc}"}
            finally:
                try:
                    (tmp / f"child-{i}.json").write_text(json.dumps(result))
                finally:
                    os._exit(code)
        pids.append(pid)
    os.close(start_r)
    os.write(start_w, b"x" * children)  # the barrier: every child starts now
    os.close(start_w)
    deadline = time.monotonic() + BOUND
    pending = set(pids)
    while pending and time.monotonic() < deadline:
        for pid in list(pending):
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                pending.discard(pid)
        time.sleep(0.05)  # polling for exits, bounded by BOUND
    for pid in pending:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    assert not pending, f"{len(pending)} children hung past {BOUND} s"
    return [json.loads((tmp / f"child-{i}.json").read_text()) for i in range(children)]


def _one_true_per_id(results: list[Any]) -> None:
    errors = [r["error"] for r in results if "error" in r]
    assert not errors, errors
    wins: dict[str, int] = {}
    for r in results:
        for rid in r["ok"]:
            wins[rid] = wins.get(rid, 0) + 1
    doubles = {rid: n for rid, n in wins.items() if n > 1}
    assert not doubles, f"{len(doubles)} ids got True more than once: {doubles}"
    assert sorted(wins) == sorted(IDS)


def _shuffled(i: int) -> list[str]:
    ids = list(IDS)
    random.Random(i).shuffle(ids)
    return ids


def _backend_pid(pool: Any) -> int:
    with pool.connection() as conn:
        pid: int = conn.info.backend_pid
        return pid


@pytest.mark.parametrize("where", ["own", "host"])
def test_sync_children_spend_each_id_once(
    where: str, pg_server: PostgresServer, table: str, tmp_path: Path
) -> None:
    url = pg_server.url + "?pool_max=1&timeout=2"
    host = None
    if where == "own":
        ledger: Any = open_ledger(url, table=table)
        pool = ledger._pool
    else:
        host = ConnectionPool(pg_server.url, min_size=1, max_size=1, open=True)
        ledger = PostgresLedger.from_pool(host, table=table, timeout=2)
        pool = host
    try:
        assert ledger.spend("parent") is True  # the pool and the watchdog are live
        parent_backend = _backend_pid(pool)

        def work(i: int) -> list[str]:
            return [rid for rid in _shuffled(i) if ledger.spend(rid) is True]

        _one_true_per_id(_fork_all(work, tmp_path))
        # The parent's session was never used nor ended by a child.
        assert _backend_pid(pool) == parent_backend
        assert ledger.spend("parent") is False
        assert ledger.spend("parent-after") is True
        assert all(ledger.is_spent(rid) for rid in IDS)
    finally:
        ledger.close()
        if host is not None:
            host.close()


@pytest.mark.parametrize("where", ["own", "host"])
def test_async_children_spend_each_id_once(
    where: str, pg_server: PostgresServer, table: str, tmp_path: Path
) -> None:
    """An event loop does not survive fork: each child runs a loop of its own, and the
    ledger it inherited rebuilds its connections there."""
    url = pg_server.url + "?pool_max=1&timeout=2"
    loop = asyncio.new_event_loop()
    host: AsyncConnectionPool[Any] | None = None
    try:
        if where == "own":
            ledger: Any = loop.run_until_complete(open_async_ledger(url, table=table))
        else:
            host = AsyncConnectionPool(pg_server.url, min_size=1, max_size=1, open=False)
            loop.run_until_complete(host.open(wait=True))
            ledger = loop.run_until_complete(
                AsyncPostgresLedger.from_pool(host, table=table, timeout=2)
            )
        assert loop.run_until_complete(ledger.spend("parent")) is True

        def work(i: int) -> list[str]:
            async def run() -> list[str]:
                return [rid for rid in _shuffled(i) if await ledger.spend(rid) is True]

            return asyncio.run(run())

        _one_true_per_id(_fork_all(work, tmp_path))
        assert loop.run_until_complete(ledger.spend("parent")) is False
        assert loop.run_until_complete(ledger.spend("parent-after")) is True
        loop.run_until_complete(ledger.aclose())
    finally:
        if host is not None:
            loop.run_until_complete(host.close())
        loop.close()


def test_a_childs_operation_keeps_its_timeout(
    pg_server: PostgresServer, table: str, tmp_path: Path
) -> None:
    """The deadline watchdog is a thread: a child has none of its parent's threads. A
    child whose server stops answering must still raise within the timeout."""
    with proxied(pg_server) as (proxy, url):
        ledger: Any = open_ledger(url, table=table, timeout=1, pool_max=1)
        try:
            assert ledger.spend("parent") is True  # the parent's watchdog thread runs
            proxy.set(Toxic.BLACKHOLE)

            def work(i: int) -> dict[str, Any]:
                started = time.monotonic()
                try:
                    ledger.spend(f"child-{i}")
                except Exception as exc:
                    outcome = type(exc).__name__
                else:
                    outcome = "answered"
                return {"outcome": outcome, "took": time.monotonic() - started}

            results = _fork_all(work, tmp_path, children=2)
        finally:
            ledger.close()
    for result in results:
        assert "error" not in result, result
        assert result["ok"]["outcome"] in ("LedgerUnavailable", "AmbiguousSpend"), result
        assert result["ok"]["took"] < 1.5, result  # the call's timeout, not a hang


def test_inherited_connection_is_not_closed_by_the_child(
    pg_server: PostgresServer, table: str, tmp_path: Path
) -> None:
    """A child that drops the ledger (and exits normally, running finalizers) must not
    end the parent's session: libpq's terminate message would travel on the shared
    socket."""
    ledger: Any = open_ledger(pg_server.url + "?pool_max=1", table=table)
    try:
        assert ledger.spend("parent") is True
        backend = _backend_pid(ledger._pool)

        def work(i: int) -> bool:
            answer = ledger.spend(f"child-{i}")
            ledger.close()  # closes what the child built, never what it inherited
            return bool(answer)

        assert [r["ok"] for r in _fork_all(work, tmp_path, children=2)] == [True, True]
        with psycopg.connect(pg_server.url, autocommit=True) as admin:
            row = admin.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (backend,)
            ).fetchone()
        assert row == (1,)
        assert _backend_pid(ledger._pool) == backend
        assert ledger.spend("parent-again") is True
    finally:
        ledger.close()
