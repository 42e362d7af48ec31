"""The embedded default: durable, shared by processes, one statement per spend."""

from __future__ import annotations

import asyncio
import functools
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from ledger_core import (
    InvalidRequestId,
    LedgerClosed,
    LedgerUnavailable,
    open_async_ledger,
    open_ledger,
)
from ledger_sqlite import AsyncSQLiteLedger, SQLiteLedger
from tests.sqlite.racing import in_processes

PROCESSES = 6
IDS = 200


def test_spend_once_and_read(tmp_path: Path) -> None:
    with SQLiteLedger(tmp_path / "l.db") as ledger:
        assert ledger.is_spent("a") is False
        assert ledger.spend("a") is True
        assert ledger.spend("a") is False
        assert ledger.is_spent("a") is True
        assert ledger.is_spent("b") is False


def test_spends_survive_new_instances(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    with SQLiteLedger(path) as first:
        first.spend("kept")
        store_id = first.store_id
    with SQLiteLedger(path) as second:
        assert second.is_spent("kept") is True
        assert second.spend("kept") is False
        assert second.store_id == store_id


def test_store_id_is_born_in_the_file(tmp_path: Path) -> None:
    a = SQLiteLedger(tmp_path / "a.db")
    b = SQLiteLedger(tmp_path / "b.db")
    a_other = SQLiteLedger(tmp_path / "a.db", namespace="other")
    ids = {a.store_id, b.store_id, a_other.store_id}
    assert None not in ids
    assert len(ids) == 3
    (tmp_path / "moved").mkdir()
    for ledger in (a, b, a_other):
        ledger.close()
    (tmp_path / "a.db").rename(tmp_path / "moved" / "a.db")
    assert SQLiteLedger(tmp_path / "moved" / "a.db").store_id == a.store_id


def test_namespaces_are_independent(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    a = open_ledger(f"sqlite:///{path}?namespace=a")
    b = open_ledger(f"sqlite:///{path}", namespace="b")
    assert a.spend("x")
    assert b.spend("x")
    assert not a.spend("x")


@pytest.mark.parametrize(
    "request_id", ["'; DROP TABLE decision_ledger; --", "nul\x00", "%", "_", "\\", "é" * 512]
)
def test_ids_are_data(tmp_path: Path, request_id: str) -> None:
    with SQLiteLedger(tmp_path / "l.db") as ledger:
        assert ledger.spend(request_id) is True
        assert ledger.spend(request_id) is False
        assert ledger.is_spent(request_id[:-1] or "z") is False


def test_invalid_ids_record_nothing(tmp_path: Path) -> None:
    with SQLiteLedger(tmp_path / "l.db") as ledger:
        for bad in ("", "x" * 1025, "\ud800"):
            with pytest.raises(InvalidRequestId):
                ledger.spend(bad)
    rows = sqlite3.connect(tmp_path / "l.db").execute(
        "SELECT count(*) FROM decision_ledger WHERE request_id != x''"  # all but the genesis
    )
    assert rows.fetchone() == (0,)


def test_unusable_files_raise_unavailable(tmp_path: Path) -> None:
    with pytest.raises(LedgerUnavailable):
        SQLiteLedger(tmp_path / "missing-dir" / "l.db")
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not a database" * 100)
    with pytest.raises(LedgerUnavailable):
        SQLiteLedger(junk)
    with pytest.raises(LedgerUnavailable, match="forgets"):
        SQLiteLedger(":memory:")


def test_closed_ledger_refuses(tmp_path: Path) -> None:
    ledger = SQLiteLedger(tmp_path / "l.db")
    ledger.close()
    with pytest.raises(LedgerClosed):
        ledger.spend("a")


def test_threads_race_one_winner(tmp_path: Path) -> None:
    ledger = SQLiteLedger(tmp_path / "l.db")
    threads, rounds = 32, 20
    barrier = threading.Barrier(threads)
    wins: list[list[bool]] = [[] for _ in range(rounds)]

    def worker() -> None:
        for r in range(rounds):
            barrier.wait()
            wins[r].append(ledger.spend(f"id-{r}"))

    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    assert [w.count(True) for w in wins] == [1] * rounds
    assert all(len(w) == threads for w in wins)


def _race(path: str, n: int, barrier: Any, out: Any) -> None:
    ledger = SQLiteLedger(path)  # every process opens (and first-opens) the store itself
    barrier.wait()
    out.put([ledger.spend(f"id-{i}") for i in range(IDS)])
    ledger.close()


def test_processes_race_one_winner_and_one_identity(tmp_path: Path) -> None:
    path = str(tmp_path / "l.db")
    results = in_processes(functools.partial(_race, path), PROCESSES)
    winners = [sum(r[i] for r in results) for i in range(IDS)]
    assert winners == [1] * IDS
    identities = sqlite3.connect(path).execute(
        "SELECT count(*) FROM decision_ledger WHERE request_id = x''"  # the genesis rows
    )
    assert identities.fetchone() == (1,)


def test_async_ledger_same_semantics(tmp_path: Path) -> None:
    path = tmp_path / "l.db"

    async def main() -> None:
        ledger = await open_async_ledger(f"sqlite:///{path}")
        assert isinstance(ledger, AsyncSQLiteLedger)
        results = await asyncio.gather(*(ledger.spend("same") for _ in range(64)))
        assert results.count(True) == 1
        assert all(type(r) is bool for r in results)
        assert await ledger.is_spent("same") is True
        await ledger.aclose()

    asyncio.run(main())
    with SQLiteLedger(path) as sync:
        assert sync.spend("same") is False


def test_async_ledger_does_not_block_the_loop(tmp_path: Path) -> None:
    """A writer holding the lock must not freeze the loop: other tasks keep running."""
    path = tmp_path / "l.db"
    blocker = sqlite3.connect(path, isolation_level=None, check_same_thread=False)

    async def main() -> None:
        ledger = await AsyncSQLiteLedger.open(path, busy_timeout=5)
        blocker.execute("BEGIN IMMEDIATE")
        spend = asyncio.ensure_future(ledger.spend("waits"))
        ticks = 0
        while not spend.done() and ticks < 3:
            await asyncio.sleep(0)  # the loop is free while the spend waits on the lock
            ticks += 1
        assert ticks == 3
        assert not spend.done()
        await asyncio.to_thread(blocker.execute, "COMMIT")
        assert await spend is True
        await ledger.aclose()

    asyncio.run(main())


def test_async_spend_cancelled_before_it_starts_never_lands(tmp_path: Path) -> None:
    """With the one worker busy, a queued spend that is cancelled is never run: the id
    stays unspent (the caller was told nothing, and nothing was written)."""
    path = tmp_path / "l.db"
    started, release = threading.Event(), threading.Event()

    def hold() -> bool:
        started.set()
        return release.wait(30)

    async def main() -> None:
        ledger = await AsyncSQLiteLedger.open(path, max_workers=1)
        assert await ledger.spend("first") is True  # its checks at first use are done
        busy = asyncio.ensure_future(ledger._off(hold))
        assert await asyncio.to_thread(started.wait, 10)  # the one worker is in ``hold``
        queued = asyncio.ensure_future(ledger.spend("cancelled"))
        for _ in range(100):  # until the spend is queued behind ``hold``
            if not ledger._workers()._calls.empty():
                break
            await asyncio.sleep(0)
        assert not ledger._workers()._calls.empty()
        queued.cancel()
        release.set()
        assert await busy is True
        with pytest.raises(asyncio.CancelledError):
            await queued
        assert await ledger.is_spent("cancelled") is False
        await ledger.aclose()

    asyncio.run(main())


def test_async_workers_outlive_a_closed_event_loop(tmp_path: Path) -> None:
    """An answer due to a loop that has closed is dropped; the worker thread goes on and
    serves the next loop (the ledger's one worker would otherwise be gone: a hang)."""
    path = tmp_path / "l.db"
    ledger = AsyncSQLiteLedger(path, max_workers=1)
    release = threading.Event()
    first = asyncio.new_event_loop()
    pending = first.run_until_complete(_started(ledger, release))
    first.close()  # the call's answer has no loop to go to
    release.set()

    async def later() -> bool:
        return await asyncio.wait_for(ledger.spend("later"), 10)

    assert asyncio.run(later()) is True
    assert pending.cancelled() or not pending.done()
    asyncio.run(ledger.aclose())


def test_an_async_call_after_close_is_refused_not_left_waiting(tmp_path: Path) -> None:
    """Once closed, the ledger's workers are gone: a later call must raise at once, not
    wait in a queue no thread takes from (a hang)."""

    async def main() -> None:
        ledger = await AsyncSQLiteLedger.open(tmp_path / "l.db", max_workers=1)
        assert await ledger.spend("before") is True  # the worker has started
        await ledger.aclose()
        with pytest.raises(LedgerClosed, match=r"<AsyncSQLiteLedger .*l\.db.* is closed"):
            await asyncio.wait_for(ledger.spend("after"), 10)  # named, as the sync one is
        with pytest.raises(LedgerClosed):
            await asyncio.wait_for(ledger.is_spent("before"), 10)

    asyncio.run(main())


async def _started(ledger: AsyncSQLiteLedger, release: threading.Event) -> asyncio.Future[Any]:
    """A call on the ledger's worker that blocks until ``release``."""
    call = asyncio.ensure_future(ledger._off(release.wait, 30))
    await asyncio.sleep(0)
    return call


def test_a_ledger_never_imports_its_test_support(tmp_path: Path) -> None:
    """Opening and using a ledger (sync and async) leaves ``ledger_sqlite.testing`` unloaded."""
    code = (
        "import asyncio, sys\n"
        "from ledger_core import open_ledger, open_async_ledger\n"
        f"url = 'sqlite:///{tmp_path / 'l.db'}'\n"
        "with open_ledger(url) as ledger:\n"
        "    assert ledger.spend('a') and ledger.is_spent('a')\n"
        "async def main():\n"
        "    ledger = await open_async_ledger(url)\n"
        "    assert await ledger.is_spent('a')\n"
        "    await ledger.aclose()\n"
        "asyncio.run(main())\n"
        "assert 'ledger_sqlite.testing' not in sys.modules, 'imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
