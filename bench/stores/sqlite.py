"""SQLite: the ledger against ``INSERT OR IGNORE`` into the same table of the same file.

The "server" is a file in a temporary directory (WAL, ``synchronous=FULL`` on both
sides: every new spend is an fsync'd commit). SQLite connections are not shared across
threads, so the raw side keeps one connection per thread, as the ledger's pool does; its
async side runs the raw call on as many worker threads as the async ledger has.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, asynccontextmanager, contextmanager
from typing import Any

from bench.measure import IS_SPENT, SPEND_SPENT, AsyncContender, Bar, async_pair, pair
from bench.stores import Subject, chunks, versions
from ledger_core import open_async_ledger, open_ledger
from ledger_core.opening import OpenRequest
from ledger_sqlite.identity import filesystem_of
from ledger_sqlite.options import url_path as sqlite_path

NAME = "sqlite"
SCHEMES = ("sqlite",)

UNAVAILABLE = OSError
RAW_CALLS = "INSERT OR IGNORE / SELECT"
WORKERS = 4  # AsyncSQLiteLedger's default worker threads
INSERT = (
    "INSERT OR IGNORE INTO decision_ledger (namespace, request_id, token, spent_at) "
    "VALUES (?, ?, ?, ?)"
)
SELECT = "SELECT 1 FROM decision_ledger WHERE namespace = ? AND request_id = ?"
TOKEN = os.urandom(16)
# The raw statement of a spent id or a read takes some 4 us: the Python around it (the
# pool, the genesis proof's bind) is the whole gap, so these cells' bar is lower.
BARS = {SPEND_SPENT: Bar(0.80), IS_SPENT: Bar(0.80)}


@contextmanager
def server() -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="ledger-bench-sqlite-") as tmp:
        yield f"sqlite:///{tmp}/bench.db"


def subject(url: str, stack: ExitStack) -> Subject:
    ledger: Any = open_ledger(url)  # creates the file and its tables first
    stack.callback(ledger.close)
    path = sqlite_path(OpenRequest.build(url).url)  # the backend's own reading of the URL
    local = threading.local()
    opened: list[sqlite3.Connection] = []

    def conn() -> sqlite3.Connection:
        found: sqlite3.Connection | None = getattr(local, "conn", None)
        if found is None:
            found = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            found.execute("PRAGMA synchronous=FULL")
            found.execute("PRAGMA busy_timeout=30000")
            opened.append(found)
            local.conn = found
        return found

    def close_all() -> None:
        for each in opened:
            each.close()

    stack.callback(close_all)

    def raw_spend(rid: str) -> object:
        return conn().execute(INSERT, ("raw", rid.encode(), TOKEN, time.time())).rowcount == 1

    def raw_is_spent(rid: str) -> object:
        return conn().execute(SELECT, ("raw", rid.encode())).fetchone() is not None

    def preload(numbers: range) -> None:
        db = conn()
        for part in chunks(len(numbers), 100_000):
            db.execute("BEGIN")
            db.executemany(
                INSERT, (("pre", f"pre-{numbers[i]}".encode(), TOKEN, 0.0) for i in part)
            )
            db.execute("COMMIT")

    @asynccontextmanager
    async def open_async() -> AsyncIterator[list[AsyncContender]]:
        aledger: Any = await open_async_ledger(url)  # WORKERS threads by default
        workers = ThreadPoolExecutor(WORKERS, thread_name_prefix="bench-sqlite")
        loop = asyncio.get_running_loop()

        async def araw_spend(rid: str) -> object:
            return await loop.run_in_executor(workers, raw_spend, rid)

        async def araw_is_spent(rid: str) -> object:
            return await loop.run_in_executor(workers, raw_is_spent, rid)

        try:
            yield async_pair(aledger, RAW_CALLS, araw_spend, araw_is_spent)
        finally:
            await aledger.aclose()
            workers.shutdown()

    return Subject(
        NAME,
        f"SQLite {sqlite3.sqlite_version} (WAL, synchronous=FULL, on {filesystem_of(path)})",
        pair(ledger, RAW_CALLS, raw_spend, raw_is_spent),
        preload,
        open_async,
        versions(),
        bars=BARS,
    )
