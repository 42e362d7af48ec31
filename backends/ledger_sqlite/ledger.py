"""SQLite ledgers: one sync core, and an async face that runs it off the event loop."""

from __future__ import annotations

import asyncio
import ctypes
import itertools
import os
import queue
import re
import sqlite3
import threading
import time
import uuid
import weakref
from collections.abc import AsyncIterator, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NoReturn

from ledger_core.base import AsyncLedgerBase, LedgerBase
from ledger_core.errors import (
    AmbiguousSpend,
    InvalidLedgerURL,
    LedgerClosed,
    LedgerError,
    LedgerUnavailable,
    UnsafeStoreConfig,
)
from ledger_core.ids import (
    DEFAULT_NAMESPACE,
    MarkerKind,
    is_marker,
    marker_range,
    marker_subject,
    validate_namespace,
    validate_request_id,
)
from ledger_core.protocol import Durability, LedgerInfo
from ledger_core.tokens import attempt_outcome, new_token

from . import schema

DEFAULT_BUSY_TIMEOUT = 30.0
# How often (seconds, piggybacked on operations) the file at the path is checked to
# still be the one this ledger opened: a pooled connection writing to a deleted or
# replaced file would be writing where no other process looks.
FILE_CHECK_PERIOD = 1.0


# Filesystems that keep a file only while the machine runs: an acknowledged spend
# survives the writer's crash (the page cache is the store) but not a power loss.
VOLATILE_FILESYSTEMS = frozenset({"tmpfs", "ramfs"})
_MOUNT_ESCAPE = re.compile(r"\\([0-7]{3})")


def filesystem_of(path: str, mounts: str | None = None) -> str | None:
    """The type of the filesystem holding ``path`` (Linux ``/proc/self/mounts``), or
    ``None`` when unknown. Read once per open: cheap, and the mount cannot change
    under an open file."""
    if mounts is None:
        try:
            with open("/proc/self/mounts", encoding="utf-8", errors="replace") as f:
                mounts = f.read()
        except OSError:
            return None
    where = os.path.realpath(os.path.dirname(path) or ".")
    found: tuple[int, str] | None = None
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        point = _MOUNT_ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), fields[1])
        inside = where == point or where.startswith(point.rstrip("/") + "/")
        if inside and (found is None or len(point) >= found[0]):  # the last, deepest mount
            found = (len(point), fields[2])
    return None if found is None else found[1]


_DURABILITY = {
    "machine": Durability.MACHINE,
    Durability.MACHINE: Durability.MACHINE,
    "process": Durability.PROCESS,
    Durability.PROCESS: Durability.PROCESS,
}


def _store_id(store_uuid: str, namespace: str) -> str:
    # The uuid has a fixed form, so everything after it is the namespace: no collisions.
    return f"sqlite:{store_uuid}:{namespace}"


def _never_close(conn: sqlite3.Connection) -> None:
    """Keep a connection inherited across ``fork()`` alive, unused, for good.

    SQLite forbids using a connection in a child process, and closing one there may
    write stale lock state into the WAL index the parent shares (mmap). So the child
    neither uses nor closes it: an extra reference means it is never deallocated.
    """
    try:
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(conn))
    except Exception:  # pragma: no cover - not CPython: keep it referenced instead
        _INHERITED.append(conn)


_INHERITED: list[sqlite3.Connection] = []
_LEDGERS: weakref.WeakSet[SQLiteLedger] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for ledger in list(_LEDGERS):
        ledger._forget_inherited()


os.register_at_fork(after_in_child=_after_fork_in_child)


class SQLiteLedger(LedgerBase):
    """A ledger in one SQLite file (WAL, ``synchronous=FULL``), safe across processes.

    Connections are pooled (one per concurrent caller), so threads never share one,
    and a forked child never uses one of its parent's. The ``store_id`` comes from a
    uuid created inside the file on first open: a new file (or one that forgot) is a
    new store, and every spend and read proves the uuid is still there. A byte-for-byte
    copy of the file carries the uuid with it; move a ledger with ``migrate``, never by
    copying the file. With ``create=False`` a missing file or ledger is
    :class:`LedgerUnavailable`: reads never create a store.

    A file on tmpfs/ramfs survives a crash of the process but not of the machine: it
    never proves (``store_id = None``) unless ``durability="process"`` accepts that.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        namespace: str = DEFAULT_NAMESPACE,
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
        create: bool = True,
        durability: str = "machine",
    ) -> None:
        accepted = _DURABILITY.get(durability)
        if accepted is None:
            raise InvalidLedgerURL(f"durability must be 'machine' or 'process', not {durability!r}")
        raw = os.fspath(path)
        if raw in ("", ":memory:") or raw.startswith("file::memory:"):
            raise LedgerUnavailable("an in-memory SQLite database forgets: give a file path")
        # Absolute once, so a later chdir() never moves the ledger to another file.
        self._path = os.path.abspath(raw)
        self._uri = Path(self._path).as_uri()
        self._namespace = validate_namespace(namespace)
        self._busy_timeout = busy_timeout
        self._idle: queue.SimpleQueue[sqlite3.Connection] = queue.SimpleQueue()
        self._all: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._refused: LedgerError | None = None  # closed, or failed closed for good
        self._next_check = 0.0
        self._uuid, self._file = self._open_store(create)
        store_id: str | None = _store_id(self._uuid, self._namespace)
        reason = None
        survives = Durability.MACHINE
        filesystem = filesystem_of(self._path)
        if filesystem in VOLATILE_FILESYSTEMS:
            survives = Durability.PROCESS
            if accepted != Durability.PROCESS:
                store_id = None
                reason = (
                    f"the file is on {filesystem}: a spend survives a crash of the process "
                    "but not of the machine; pass durability=process to accept that"
                )
        self._info = LedgerInfo(
            backend="sqlite",
            store_id=store_id,
            reason=reason,
            location=f"sqlite:///{self._path}",
            namespace=self._namespace,
            identity="uuid created inside the database file on first open",
            durability=survives,
        )
        self._next_check = time.monotonic() + FILE_CHECK_PERIOD
        _LEDGERS.add(self)

    # -- connections -------------------------------------------------------------------

    def _connect(self, mode: str = "rw", *, must_hold_ledger: bool = False) -> sqlite3.Connection:
        """A new connection; ``rw`` never creates the file (only the first open may).

        ``must_hold_ledger``: refuse a file without the ledger's tables before anything is
        written to it (asking for WAL would convert another application's database).
        """
        try:
            conn = sqlite3.connect(
                f"{self._uri}?mode={mode}",
                uri=True,
                timeout=self._busy_timeout,
                isolation_level=None,  # autocommit: each statement is its own transaction
                check_same_thread=False,  # pooled, but only ever used by one thread at a time
            )
        except sqlite3.Error as exc:
            raise LedgerUnavailable(f"cannot open SQLite ledger {self._path!r}: {exc}") from exc
        try:
            if must_hold_ledger and conn.execute(schema.HAS_TABLES).fetchone()[0] != 2:
                conn.close()
                raise self._missing(f"{self._path!r} holds no decision ledger")
            # Durability is per connection: ours are FULL whatever other processes set.
            # WAL is a property of the file; asking for it again verifies it.
            conn.execute("PRAGMA synchronous=FULL")
            mode_now = self._wal(conn)
        except sqlite3.Error as exc:
            conn.close()
            raise LedgerUnavailable(f"cannot open SQLite ledger {self._path!r}: {exc}") from exc
        if str(mode_now).lower() != "wal":
            conn.close()
            raise UnsafeStoreConfig(f"SQLite refused WAL mode for {self._path!r} ({mode_now})")
        with self._lock:
            self._all.append(conn)
        return conn

    def _wal(self, conn: sqlite3.Connection) -> str:
        """Put the file in WAL mode (it stays so) and return the mode SQLite reports.

        Switching needs an exclusive lock, and while several processes create one file
        at once SQLite answers BUSY at once, without its busy handler (to avoid a
        deadlock); so this waits as the handler would, within ``busy_timeout``.
        """
        deadline = time.monotonic() + self._busy_timeout
        pause = 0.001
        while True:
            try:
                mode = str(conn.execute("PRAGMA journal_mode").fetchone()[0])
                if mode.lower() == "wal":
                    return mode
                return str(conn.execute("PRAGMA journal_mode=WAL").fetchone()[0])
            except sqlite3.OperationalError as exc:
                if not _busy(exc):
                    raise
                if time.monotonic() + pause > deadline:
                    raise
            time.sleep(pause)
            pause = min(pause * 2, 0.05)

    def _missing(self, what: str) -> LedgerUnavailable:
        return LedgerUnavailable(
            f"{what} (create=false: reads and migration sources never create a store); "
            f"create it with `decision-ledger setup sqlite:///{self._path}` or create=true"
        )

    def _open_store(self, create: bool) -> tuple[str, tuple[int, int]]:
        if not create and not os.path.exists(self._path):
            raise self._missing(f"no SQLite ledger at {self._path!r}: the file does not exist")
        conn = self._connect("rwc" if create else "rw", must_hold_ledger=not create)
        try:
            try:
                if create:
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
                stat = os.stat(self._path)
            except sqlite3.Error as exc:
                raise LedgerUnavailable(
                    f"cannot set up SQLite ledger {self._path!r}: {exc}"
                ) from exc
            except OSError as exc:
                raise LedgerUnavailable(f"cannot stat SQLite ledger {self._path!r}") from exc
        finally:
            self._idle.put(conn)
        if row is None:
            raise self._missing(f"the ledger in {self._path!r} has no identity yet")
        return str(row[0]), (stat.st_dev, stat.st_ino)

    def _acquire(self) -> sqlite3.Connection:
        """An idle pooled connection, or a new one: one per concurrent caller, no more.

        (A plain get/put rather than a context manager: this is the hot path.)
        """
        # No getpid() here (a syscall, 0.7 us): os.register_at_fork resets the pool in a
        # child before any code of the child can reach it.
        if self._refused is not None:
            raise type(self._refused)(str(self._refused))
        if time.monotonic() >= self._next_check:
            self._check_file()
        try:
            return self._idle.get_nowait()
        except queue.Empty:
            return self._connect()

    def _forget_inherited(self) -> None:
        """In a forked child: drop the parent's connections without using or closing them."""
        if self._pid == os.getpid():
            return
        for conn in self._all:
            _never_close(conn)
        self._all = []
        self._idle = queue.SimpleQueue()
        self._lock = threading.Lock()  # the parent's may have been held at fork time
        self._pid = os.getpid()

    def _check_file(self) -> None:
        """Fail closed for good if the path no longer names the file this ledger opened."""
        try:
            stat = os.stat(self._path)
            same = (stat.st_dev, stat.st_ino) == self._file
        except OSError:
            same = False
        if not same:
            self._refuse(
                UnsafeStoreConfig(
                    f"the SQLite ledger file {self._path!r} was deleted or replaced since this "
                    "ledger opened; reopen it (anything minted under the old store_id is "
                    "asked again)"
                )
            )
        self._next_check = time.monotonic() + FILE_CHECK_PERIOD

    def _refuse(self, error: LedgerError) -> NoReturn:
        self._refused = error
        raise type(error)(str(error))

    def _forgot(self) -> NoReturn:
        self._refuse(
            UnsafeStoreConfig(
                f"the SQLite ledger {self._path!r} forgot: its identity changed since this "
                f"ledger opened ({self._info.store_id}); reopen it (anything minted under "
                "the old store_id is asked again)"
            )
        )

    # -- operations ------------------------------------------------------------------

    def _spend(self, request_id: bytes) -> bool:
        token = new_token()
        namespace = self._namespace
        conn = self._acquire()
        try:
            try:
                cursor = conn.execute(
                    schema.SPEND, (namespace, request_id, self._uuid, token, time.time())
                )
                return cursor.rowcount == 1  # 0: a conflict, in the store we opened
            except sqlite3.Error as exc:
                failure = exc
            # A forgotten store (NOT NULL), or an outcome unknown: our token decides (C5).
            try:
                row = conn.execute(
                    schema.READ_TOKEN, (self._uuid, namespace, request_id)
                ).fetchone()
            except sqlite3.Error as exc:
                if _no_table(exc) or _no_table(failure):
                    row = (0, None)
                else:
                    raise AmbiguousSpend(
                        f"spend failed ({failure}) and its outcome could not be read ({exc})"
                    ) from failure
        finally:
            self._idle.put(conn)
        if row[0] != 1:
            self._forgot()
        outcome = attempt_outcome(None if row[1] is None else bytes(row[1]), token)
        if outcome is None:
            raise LedgerUnavailable(f"spend did not land: {failure}") from failure
        return outcome

    def _is_spent(self, request_id: bytes) -> bool:
        conn = self._acquire()
        try:
            row = conn.execute(
                schema.IS_SPENT, (self._namespace, request_id, self._uuid)
            ).fetchone()
        except sqlite3.Error as exc:
            if _no_table(exc):
                self._forgot()
            raise LedgerUnavailable(f"is_spent failed: {exc}") from exc
        finally:
            self._idle.put(conn)
        if row is None:
            self._forgot()
        return bool(row[0] == 1)

    def lineage(self) -> list[str]:
        """The store_ids this store was migrated from (its lineage markers)."""
        low, high = marker_range(MarkerKind.LINEAGE)
        rows = self._snapshot(schema.MARKER_RANGE, (self._namespace, low, high), "lineage")
        return [marker_subject(MarkerKind.LINEAGE, bytes(raw)) for (raw,) in rows]

    def _snapshot(self, query: str, params: tuple[object, ...], what: str) -> list[Any]:
        """``query``'s rows read in one snapshot with the proof of the identity."""
        conn = self._acquire()
        try:
            conn.execute("BEGIN")  # one snapshot: the identity and the rows together
            try:
                same = conn.execute(schema.SAME_STORE, (self._uuid,)).fetchone()[0]
                rows = conn.execute(query, params).fetchall()
            finally:
                conn.execute("COMMIT")
        except sqlite3.Error as exc:
            if _no_table(exc):
                self._forgot()
            raise LedgerUnavailable(f"{what} failed: {exc}") from exc
        finally:
            self._idle.put(conn)
        if same != 1:
            self._forgot()
        return rows

    def spend_many(self, request_ids: Sequence[str]) -> list[bool]:
        """Spend a batch in ONE transaction (one fsync): each id's answer is what
        :meth:`spend` would say (``True`` only if this call recorded it). Nothing of a
        failed batch stays (rolled back), except after a failed ``COMMIT``: ambiguous."""
        raws = [validate_request_id(r) for r in request_ids]
        if not raws:
            return []
        token, now, namespace = new_token(), time.time(), self._namespace
        conn = self._acquire()
        try:
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise LedgerUnavailable(f"spend_many could not begin: {exc}") from exc
            try:
                won = [
                    conn.execute(schema.SPEND, (namespace, raw, self._uuid, token, now)).rowcount
                    == 1
                    for raw in raws
                ]
            except sqlite3.Error as exc:
                conn.execute("ROLLBACK")
                if isinstance(exc, sqlite3.IntegrityError) or _no_table(exc):
                    self._forgot()  # the token came out NULL: not the store we opened
                raise LedgerUnavailable(f"spend_many failed (rolled back): {exc}") from exc
            try:
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                raise AmbiguousSpend(f"spend_many: COMMIT failed, outcome unknown: {exc}") from exc
        finally:
            self._idle.put(conn)
        return won

    def is_spent_many(self, request_ids: Sequence[str]) -> list[bool]:
        """Read a batch in one read transaction."""
        raws = [validate_request_id(r) for r in request_ids]
        conn = self._acquire()
        try:
            conn.execute("BEGIN")
            try:
                rows = [
                    conn.execute(schema.IS_SPENT, (self._namespace, raw, self._uuid)).fetchone()
                    for raw in raws
                ]
            finally:
                conn.execute("COMMIT")
        except sqlite3.Error as exc:
            if _no_table(exc):
                self._forgot()
            raise LedgerUnavailable(f"is_spent_many failed: {exc}") from exc
        finally:
            self._idle.put(conn)
        if any(row is None for row in rows):
            self._forgot()
        return [bool(row[0] == 1) for row in rows if row is not None]

    def spent_ids(self, page: int = 1000) -> Iterator[str]:
        """Every id spent in this namespace, in byte order (for ``migrate``)."""
        after = b""
        while True:
            rows = self._snapshot(schema.SCAN_PAGE, (self._namespace, after, page), "scan")
            for (raw,) in rows:
                if not is_marker(raw):
                    yield bytes(raw).decode("utf-8")
            if len(rows) < page:
                return
            after = bytes(rows[-1][0])

    def close(self) -> None:
        with self._lock:
            self._refused = LedgerClosed(f"{self!r} is closed")
            conns, self._all = self._all, []
        if self._pid != os.getpid():  # inherited: never ours to close
            return
        for conn in conns:
            conn.close()


def _next_chunk(ids: Iterator[str], size: int) -> list[str]:
    return list(itertools.islice(ids, size))


_SQLITE_BUSY = 5  # sqlite3.SQLITE_BUSY exists from Python 3.11 only


def _busy(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)  # 3.11+; the message before that
    return code == _SQLITE_BUSY if code is not None else "database is locked" in str(exc)


def _no_table(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.OperationalError) and "no such table" in str(exc)


class AsyncSQLiteLedger(AsyncLedgerBase):
    """The same ledger for asyncio: each call runs on the ledger's own worker threads,
    so the event loop never waits on a disk sync or a busy lock."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        namespace: str = DEFAULT_NAMESPACE,
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
        create: bool = True,
        durability: str = "machine",
        max_workers: int = 4,
    ) -> None:
        self._sync = SQLiteLedger(
            path,
            namespace=namespace,
            busy_timeout=busy_timeout,
            create=create,
            durability=durability,
        )
        self._info = self._sync.describe()
        self._max_workers = max_workers
        self._pid = os.getpid()
        self._executor = ThreadPoolExecutor(max_workers, thread_name_prefix="ledger-sqlite")

    @classmethod
    async def open(
        cls,
        path: str | os.PathLike[str],
        *,
        namespace: str = DEFAULT_NAMESPACE,
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
        create: bool = True,
        durability: str = "machine",
    ) -> AsyncSQLiteLedger:
        """Create the ledger without blocking the loop on the first open."""
        return await asyncio.to_thread(
            cls,
            path,
            namespace=namespace,
            busy_timeout=busy_timeout,
            create=create,
            durability=durability,
        )

    def _workers(self) -> ThreadPoolExecutor:
        """The worker threads; a forked child gets its own (the parent's do not exist)."""
        if self._pid != os.getpid():
            self._executor = ThreadPoolExecutor(
                self._max_workers, thread_name_prefix="ledger-sqlite"
            )
            self._pid = os.getpid()
        return self._executor

    async def _spend(self, request_id: bytes) -> bool:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._workers(), self._sync._spend, request_id)

    async def _is_spent(self, request_id: bytes) -> bool:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._workers(), self._sync._is_spent, request_id)

    async def spent_ids(self, page: int = 1000) -> AsyncIterator[str]:
        """:meth:`SQLiteLedger.spent_ids`, a page at a time on a worker thread."""
        pages = self._sync.spent_ids(page)
        loop = asyncio.get_running_loop()
        while chunk := await loop.run_in_executor(self._workers(), _next_chunk, pages, page):
            for request_id in chunk:
                yield request_id

    async def aclose(self) -> None:
        self._executor.shutdown(wait=False)
        await asyncio.to_thread(self._sync.close)
