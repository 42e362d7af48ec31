"""C10 on SQLite: ``spend_as`` records the id and the key's digest in one statement."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ledger_core import InvalidRequestId, LedgerUnavailable, UnsafeStoreConfig
from ledger_core.protocol import can_reenter
from ledger_sqlite import AsyncSQLiteLedger, SQLiteLedger
from tests.sqlite.racing import in_processes
from tests.sqlite.test_identity import OLD_UUID, old_file

KEY_A = "attempt-key-A-0123456789"
KEY_B = "attempt-key-B-0123456789"
THREADS = 32
PROCESSES = 8


def key(n: int) -> str:
    return f"attempt-key-{n:04d}-0123456789"


def test_the_winner_re_enters_and_no_one_else(tmp_path: Path) -> None:
    with SQLiteLedger(tmp_path / "l.db") as ledger:
        assert can_reenter(ledger)
        assert ledger.spend_as("r", KEY_A) is True
        assert ledger.spend_as("r", KEY_A) is True  # the same attempt, retried
        assert ledger.spend_as("r", KEY_B) is False
        assert ledger.spend("r") is False
        assert ledger.is_spent("r") is True
        assert ledger.spend("plain") is True
        assert ledger.spend_as("plain", KEY_A) is False  # a plain spend has no holder
        assert list(ledger.spent_ids()) == ["plain", "r"]
    with SQLiteLedger(tmp_path / "l.db") as again:  # the digest is in the file
        assert again.spend_as("r", KEY_A) is True
        assert again.spend_as("r", KEY_B) is False


def test_the_key_is_never_stored(tmp_path: Path) -> None:
    with SQLiteLedger(tmp_path / "l.db") as ledger:
        ledger.spend_as("r", KEY_A)
    assert KEY_A.encode() not in (tmp_path / "l.db").read_bytes()
    wal = tmp_path / "l.db-wal"
    assert not wal.exists() or KEY_A.encode() not in wal.read_bytes()


def test_bad_keys_are_refused_before_any_write(tmp_path: Path) -> None:
    with SQLiteLedger(tmp_path / "l.db") as ledger:
        for bad in ("short", "x" * 257, "é" * 20):
            with pytest.raises(InvalidRequestId):
                ledger.spend_as("r", bad)
        assert ledger.is_spent("r") is False


def test_async_same_semantics(tmp_path: Path) -> None:
    async def go() -> list[bool]:
        ledger = await AsyncSQLiteLedger.open(tmp_path / "l.db")
        try:
            assert can_reenter(ledger)
            plain = await ledger.spend("plain")
            answers = [await ledger.spend_as("r", k) for k in (KEY_A, KEY_B, KEY_A)]
            return [plain, *answers, await ledger.spend_as("plain", KEY_A)]
        finally:
            await ledger.aclose()

    assert asyncio.run(go()) == [True, True, False, True, False]
    with SQLiteLedger(tmp_path / "l.db") as sync:  # one store, two faces
        assert sync.spend_as("r", KEY_A) is True


def test_threads_with_distinct_keys_one_winner(tmp_path: Path) -> None:
    ledger = SQLiteLedger(tmp_path / "l.db")
    rounds = 10
    barrier = threading.Barrier(THREADS)
    results: list[list[tuple[int, bool]]] = [[] for _ in range(rounds)]

    def worker(n: int) -> None:
        for r in range(rounds):
            barrier.wait()
            results[r].append((n, ledger.spend_as(f"id-{r}", key(n))))

    pool = [threading.Thread(target=worker, args=(n,)) for n in range(THREADS)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    for r, answers in enumerate(results):
        winners = [n for n, won in answers if won]
        assert len(answers) == THREADS
        assert len(winners) == 1, (r, winners)
        assert ledger.spend_as(f"id-{r}", key(winners[0])) is True  # it re-enters
        loser = (winners[0] + 1) % THREADS
        assert ledger.spend_as(f"id-{r}", key(loser)) is False
    ledger.close()


def _race(path: str, n: int, barrier: Any, out: Any) -> None:
    ledger = SQLiteLedger(path)
    barrier.wait()
    out.put((n, [ledger.spend_as(f"id-{i}", key(n)) for i in range(50)]))
    ledger.close()


def test_processes_with_distinct_keys_one_winner(tmp_path: Path) -> None:
    path = str(tmp_path / "l.db")
    SQLiteLedger(path).close()
    results = dict(in_processes(functools.partial(_race, path), PROCESSES))
    with SQLiteLedger(path) as ledger:
        for i in range(50):
            winners = [n for n, answers in results.items() if answers[i]]
            assert len(winners) == 1, (i, winners)
            assert ledger.spend_as(f"id-{i}", key(winners[0])) is True
            assert ledger.spend_as(f"id-{i}", key(PROCESSES)) is False


def _forget_identity(path: Path) -> None:
    """The genesis row goes, the records stay: the statement must still fail closed."""
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("DELETE FROM decision_ledger WHERE request_id = x''")
    other.close()


def test_a_store_that_forgot_fails_closed(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    ledger = SQLiteLedger(path)
    assert ledger.spend_as("held", KEY_A) is True
    _forget_identity(path)
    with pytest.raises(UnsafeStoreConfig, match="forgot"):
        ledger.spend_as("held", KEY_A)  # its own record, but not the store it opened
    with pytest.raises(UnsafeStoreConfig):
        ledger.spend_as("fresh", KEY_A)
    ledger.close()


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")
    try:
        yield
    finally:
        other.execute("ROLLBACK")
        other.close()


def test_a_failed_write_is_settled_by_the_stored_digest(tmp_path: Path) -> None:
    """The statement raises (a busy file); what is stored decides, as for spend (C5)."""
    path = tmp_path / "l.db"
    ledger = SQLiteLedger(path, busy_timeout=0.05)
    assert ledger.spend_as("held", KEY_A) is True
    ledger.spend("plain")
    with _locked(path):
        assert ledger.spend_as("held", KEY_A) is True  # the same key: re-entry stands
        assert ledger.spend_as("held", KEY_B) is False
        assert ledger.spend_as("plain", KEY_A) is False
        with pytest.raises(LedgerUnavailable, match="did not land"):
            ledger.spend_as("fresh", KEY_A)
    assert ledger.spend_as("fresh", KEY_B) is True  # nothing of the failed call stayed
    ledger.close()


def test_an_older_file_gains_the_column_when_create_is_allowed(tmp_path: Path) -> None:
    """A file of versions before re-entry (no ``holder`` column; without create it is
    refused, ``test_identity``) is upgraded in place by an open with create allowed."""
    path = tmp_path / "old.db"
    old_file(path)
    with SQLiteLedger(path) as ledger:  # create=true: the column is added
        assert ledger.store_id == f"sqlite:{OLD_UUID}:default"  # the same store, upgraded
        assert ledger.spend_as("old", KEY_A) is False  # an old record has no holder
        assert ledger.spend_as("fresh", KEY_A) is True
        assert ledger.spend_as("fresh", KEY_A) is True
    with SQLiteLedger(path, create=False) as reader:  # upgraded: readers open it now
        assert reader.spend_as("fresh", KEY_A) is True
        assert reader.spend_as("fresh", KEY_B) is False
