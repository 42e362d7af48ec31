"""SQLite ledgers: one sync core, and an async face that runs it off the event loop."""

from __future__ import annotations

import asyncio
import os
import queue
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

from ledger_core.base import AsyncLedgerBase, LedgerBase
from ledger_core.errors import AmbiguousSpend, LedgerClosed, LedgerUnavailable
from ledger_core.ids import DEFAULT_NAMESPACE, is_marker, validate_namespace
from ledger_core.protocol import LedgerInfo
from ledger_core.tokens import attempt_outcome, new_token

from . import schema

DEFAULT_BUSY_TIMEOUT = 30.0


def _store_id(store_uuid: str, namespace: str) -> str:
    # The uuid has a fixed form, so everything after it is the namespace: no collisions.
    return f"sqlite:{store_uuid}:{namespace}"


class SQLiteLedger(LedgerBase):
    """A ledger in one SQLite file (WAL, ``synchronous=FULL``), safe across processes.

    Connections are pooled (one per concurrent caller), so threads never share one.
    The ``store_id`` comes from a uuid created inside the file on first open: a new
    file is a new store. A byte-for-byte copy of the file carries the uuid with it;
    move a ledger with ``migrate``, never by copying the file.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        namespace: str = DEFAULT_NAMESPACE,
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
    ) -> None:
        self._path = os.fspath(path)
        if self._path in ("", ":memory:") or self._path.startswith("file::memory:"):
            raise LedgerUnavailable("an in-memory SQLite database forgets: give a file path")
        self._namespace = validate_namespace(namespace)
        self._busy_timeout = busy_timeout
        self._idle: queue.SimpleQueue[sqlite3.Connection] = queue.SimpleQueue()
        self._all: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._closed = False
        store_uuid = self._open_store()
        self._info = LedgerInfo(
            backend="sqlite",
            store_id=_store_id(store_uuid, self._namespace),
            location=f"sqlite:///{self._path}",
            namespace=self._namespace,
            identity="uuid created inside the database file on first open",
        )

    def _connect(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(
                self._path,
                timeout=self._busy_timeout,
                isolation_level=None,  # autocommit: each statement is its own transaction
                check_same_thread=False,  # pooled, but only ever used by one thread at a time
            )
            conn.execute("PRAGMA synchronous=FULL")
        except sqlite3.Error as exc:
            raise LedgerUnavailable(f"cannot open SQLite ledger {self._path!r}: {exc}") from exc
        with self._lock:
            self._all.append(conn)
        return conn

    def _open_store(self) -> str:
        conn = self._acquire()
        try:
            try:
                mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
                if str(mode).lower() != "wal":
                    raise LedgerUnavailable(f"SQLite refused WAL mode for {self._path!r} ({mode})")
                conn.execute("BEGIN IMMEDIATE")
                try:
                    for statement in schema.SCHEMA:
                        conn.execute(statement)
                    conn.execute(schema.CREATE_IDENTITY, (str(uuid.uuid4()),))
                    conn.execute("COMMIT")
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
                row = conn.execute(schema.READ_IDENTITY).fetchone()
            except sqlite3.Error as exc:
                raise LedgerUnavailable(
                    f"cannot set up SQLite ledger {self._path!r}: {exc}"
                ) from exc
        finally:
            self._idle.put(conn)
        return str(row[0])

    def _acquire(self) -> sqlite3.Connection:
        """An idle pooled connection, or a new one: one per concurrent caller, no more.

        (A plain get/put rather than a context manager: this is the hot path.)
        """
        if self._closed:
            raise LedgerClosed(f"{self!r} is closed")
        try:
            return self._idle.get_nowait()
        except queue.Empty:
            return self._connect()

    def _spend(self, request_id: bytes) -> bool:
        token = new_token()
        key = (self._namespace, request_id)
        conn = self._acquire()
        try:
            try:
                cursor = conn.execute(schema.SPEND, (*key, token, time.time()))
                return cursor.rowcount == 1
            except sqlite3.Error as exc:
                failure = exc
            # The outcome is unknown: our token in the row is the only proof (C5).
            try:
                row = conn.execute(schema.READ_TOKEN, key).fetchone()
            except sqlite3.Error as exc:
                raise AmbiguousSpend(
                    f"spend failed ({failure}) and its outcome could not be read ({exc})"
                ) from failure
        finally:
            self._idle.put(conn)
        outcome = attempt_outcome(None if row is None else bytes(row[0]), token)
        if outcome is None:
            raise LedgerUnavailable(f"spend did not land: {failure}") from failure
        return outcome

    def _is_spent(self, request_id: bytes) -> bool:
        conn = self._acquire()
        try:
            row = conn.execute(schema.IS_SPENT, (self._namespace, request_id)).fetchone()
        except sqlite3.Error as exc:
            raise LedgerUnavailable(f"is_spent failed: {exc}") from exc
        finally:
            self._idle.put(conn)
        return row is not None

    def spent_ids(self, page: int = 1000) -> Iterator[str]:
        """Every id spent in this namespace, in byte order (for ``migrate``)."""
        after = b""
        while True:
            conn = self._acquire()
            try:
                rows = conn.execute(schema.SCAN_PAGE, (self._namespace, after, page)).fetchall()
            except sqlite3.Error as exc:
                raise LedgerUnavailable(f"scan failed: {exc}") from exc
            finally:
                self._idle.put(conn)
            for (raw,) in rows:
                if not is_marker(raw):
                    yield bytes(raw).decode("utf-8")
            if len(rows) < page:
                return
            after = bytes(rows[-1][0])

    def close(self) -> None:
        with self._lock:
            self._closed = True
            conns, self._all = self._all, []
        for conn in conns:
            conn.close()


class AsyncSQLiteLedger(AsyncLedgerBase):
    """The same ledger for asyncio: each call runs on the ledger's own worker threads,
    so the event loop never waits on a disk sync or a busy lock."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        namespace: str = DEFAULT_NAMESPACE,
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
        max_workers: int = 4,
    ) -> None:
        self._sync = SQLiteLedger(path, namespace=namespace, busy_timeout=busy_timeout)
        self._info = self._sync.describe()
        self._executor = ThreadPoolExecutor(max_workers, thread_name_prefix="ledger-sqlite")

    @classmethod
    async def open(
        cls,
        path: str | os.PathLike[str],
        *,
        namespace: str = DEFAULT_NAMESPACE,
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
    ) -> AsyncSQLiteLedger:
        """Create the ledger without blocking the loop on the first open."""
        return await asyncio.to_thread(cls, path, namespace=namespace, busy_timeout=busy_timeout)

    async def _spend(self, request_id: bytes) -> bool:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._sync._spend, request_id)

    async def _is_spent(self, request_id: bytes) -> bool:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._sync._is_spent, request_id)

    async def aclose(self) -> None:
        self._executor.shutdown(wait=False)
        await asyncio.to_thread(self._sync.close)
