"""The sync SQLite ledger: each call runs its statements on a pooled connection (one per
concurrent caller; a forked child never uses its parent's), read top-down from ``_spend``
to ``execute``. A transaction left open by a raise is rolled back before the connection
is pooled again."""

from __future__ import annotations

import contextlib
import ctypes
import os
import platform
import queue
import shlex
import sqlite3
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from ledger_core import forks, notices
from ledger_core.base import ReentrantLedgerBase
from ledger_core.doctor import Check
from ledger_core.errors import (
    AmbiguousSpend,
    LedgerClosed,
    LedgerError,
    LedgerUnavailable,
    UnsafeStoreConfig,
    missing_store,
)
from ledger_core.guard import Guard
from ledger_core.ids import (
    DEFAULT_NAMESPACE,
    MarkerKind,
    is_marker,
    marker_range,
    marker_subject,
    validate_request_id,
)
from ledger_core.listing import pages
from ledger_core.tokens import new_token

from . import errors, identity
from . import statements as sql
from .identity import filesystem_of
from .options import DEFAULT_BUSY_TIMEOUT, Target

T = TypeVar("T")

# How often (seconds, piggybacked on operations) the file at the path is checked to
# still be the one this ledger opened: a pooled connection writing to a deleted or
# replaced file would be writing where no other process looks.
FILE_CHECK_PERIOD = 1.0


def _never_close(conn: sqlite3.Connection) -> None:
    """Keep a connection inherited across ``fork()`` alive, unused, for good: SQLite
    forbids using it in a child, and closing it there may write stale lock state into
    the WAL index the parent shares (mmap)."""
    # A reference leaked through CPython's C API, because sqlite3 has no public way to
    # drop a connection unclosed and a module-level list is freed, closing them, when the
    # child's interpreter exits (test_a_child_never_closes_an_inherited_connection_even_at_exit).
    try:
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(conn))
    except Exception:  # pragma: no cover - not CPython: referenced until exit at least
        _INHERITED.append(conn)


_INHERITED: list[sqlite3.Connection] = []
_POOLS: weakref.WeakSet[Connections] = weakref.WeakSet()  # for the fork hook; a closed one goes


def _after_fork_in_child() -> None:
    # Eager (a child that never calls still must not close them at exit), and after
    # ledger_core.forks' own hook (imported first: hooks run in registration order).
    for pool in list(_POOLS):
        pool.forget_inherited()


os.register_at_fork(after_in_child=_after_fork_in_child)


def _stat(path: str) -> tuple[int, int] | None:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_dev, stat.st_ino


def _writable(path: str) -> bool:
    """Whether a file SQLite opens now would be opened for writing: ``access(W_OK)`` sees
    what its ``open(O_RDWR)`` sees (immutable, a read-only mount, permissions) without an
    fd of ours, whose close would drop the process's POSIX locks on the file."""
    wal = f"{path}-wal"
    return os.access(path, os.W_OK) and (not os.path.exists(wal) or os.access(wal, os.W_OK))


class _Connection(sqlite3.Connection):
    """A pooled connection that remembers whether SQLite may have opened it read-only,
    and whether a statement on it failed in a way that rules out pooling it again."""

    read_only = False
    spoiled = False
    # The one cursor spend and is_spent reuse: a cursor per call costs 0.2 µs of a 5 µs
    # read. A statement that ran to its end (theirs always do) holds no read snapshot.
    hot: sqlite3.Cursor

    def failed(self, exc: sqlite3.Error) -> None:
        """Note ``exc``: any failure but a busy lock or a constraint spoils it (it may be
        read-only for good, or have hit an I/O error that a fresh connection sees anew)."""
        self.spoiled = self.spoiled or errors.spoils_connection(exc)


def setup_command(target: Target) -> str:
    namespace = target.namespace
    named = "" if namespace == DEFAULT_NAMESPACE else f" --namespace {shlex.quote(namespace)}"
    return f"`decision-ledger setup {target.location}{named}` (or open with create=true)"


def _missing(target: Target, what: str) -> LedgerUnavailable:
    return LedgerUnavailable(
        f"{what} (create=false: reads and migration sources never create or alter a "
        f"store); run {setup_command(target)} to create it, or to upgrade a file of an "
        "older version"
    )


def _prepare(conn: _Connection, target: Target, must_hold_ledger: bool) -> None:
    """Make a new connection safe: durability per connection, WAL verified;
    ``must_hold_ledger`` refuses a file without the ledger's tables first (asking for WAL
    would convert another application's database)."""
    try:
        if must_hold_ledger and conn.execute(sql.HAS_TABLES).fetchone()[0] != 2:
            raise _missing(target, f"{target.path!r} holds no decision ledger")
        # Durability is per connection: ours are FULL whatever other processes set.
        # WAL is a property of the file; asking for it again verifies it.
        conn.execute("PRAGMA synchronous=FULL")
        mode = _wal(conn, target.busy_timeout)
    except sqlite3.Error as exc:
        raise errors.unavailable("cannot open", target.path, exc) from exc
    if mode.lower() != "wal":
        raise UnsafeStoreConfig(f"SQLite refused WAL mode for {target.path!r} ({mode})")


def _wal(conn: _Connection, busy_timeout: float) -> str:
    """Put the file in WAL mode and return the mode SQLite reports. Switching answers
    BUSY at once, without the busy handler, while others create the file: so this waits
    as the handler would, within ``busy_timeout``."""
    deadline = time.monotonic() + busy_timeout
    pause = 0.001
    while True:
        try:
            mode = str(conn.execute("PRAGMA journal_mode").fetchone()[0])
            if mode.lower() == "wal":
                return mode
            return str(conn.execute("PRAGMA journal_mode=WAL").fetchone()[0])
        except sqlite3.OperationalError as exc:
            if not errors.busy(exc) or time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.05)


class Connections:
    """A ledger's connections: an idle pool, each used by one thread at a time."""

    def __init__(self, target: Target) -> None:
        self.target = target
        self.uri = Path(target.path).as_uri()
        self.idle: queue.SimpleQueue[_Connection] = queue.SimpleQueue()
        self.all: list[_Connection] = []
        self.lock = threading.Lock()
        self.born = forks.generation  # a child's pool forgets the parent's connections
        _POOLS.add(self)

    def connect(self, mode: str = "rw", *, must_hold_ledger: bool = False) -> _Connection:
        """A new connection; ``rw`` never creates the file (only the first open may)."""
        try:
            conn = sqlite3.connect(
                f"{self.uri}?mode={mode}",
                uri=True,
                timeout=self.target.busy_timeout,
                isolation_level=None,  # autocommit: each statement is its own transaction
                check_same_thread=False,  # pooled, but only ever used by one thread at a time
                factory=_Connection,
            )
        except sqlite3.Error as exc:
            raise errors.unavailable("cannot open", self.target.path, exc) from exc
        # SQLite opens a write-protected file read-only, silently, for good: such a
        # connection serves its call (reads work) and is never pooled, so none outlives
        # a read-only spell of the file.
        conn.read_only = not _writable(self.target.path)
        conn.hot = conn.cursor()
        try:
            _prepare(conn, self.target, must_hold_ledger)
        except BaseException:
            conn.close()
            raise
        with self.lock:
            self.all.append(conn)
        return conn

    def acquire(self) -> _Connection:
        # No fork check here: os.register_at_fork resets the pool in a
        # child before any code of the child can reach it.
        try:
            return self.idle.get_nowait()
        except queue.Empty:
            return self.connect()

    def release(self, conn: _Connection) -> None:
        """Pool ``conn`` again, with no transaction left open; close it when spoiled."""
        spoiled = conn.spoiled or conn.read_only
        if not spoiled and conn.in_transaction:
            try:
                conn.execute("ROLLBACK")
            except sqlite3.Error:
                spoiled = True
        if not spoiled:
            self.idle.put(conn)
            return
        with self.lock:
            if conn in self.all:
                self.all.remove(conn)
        if self.born == forks.generation:
            with contextlib.suppress(sqlite3.Error):
                conn.close()

    @contextlib.contextmanager
    def borrowed(self) -> Iterator[_Connection]:
        """A connection for one call (not on the hot path: a context manager costs a
        microsecond, so ``spend`` and ``is_spent`` write this out)."""
        conn = self.acquire()
        try:
            yield conn
        except sqlite3.Error as exc:
            conn.failed(exc)
            raise
        finally:
            self.release(conn)

    def forget_inherited(self) -> None:
        if self.born == forks.generation:
            return
        for conn in self.all:
            _never_close(conn)
        self.all = []
        self.idle = queue.SimpleQueue()
        self.lock = threading.Lock()  # the parent's may have been held at fork time
        self.born = forks.generation

    def close(self) -> None:
        with self.lock:
            conns, self.all = self.all, []
        if self.born != forks.generation:  # inherited: never ours to close
            return
        for conn in conns:
            conn.close()


class SQLiteLedger(ReentrantLedgerBase):
    """A ledger in one SQLite file (WAL, ``synchronous=FULL``), safe across threads and
    processes; its ``store_id`` is the namespace's genesis (docs/sqlite.md). A copy of
    the file carries the genesis with it: move a ledger with ``migrate``.

    Every spend and read proves, in its one statement, that the namespace's genesis is
    the one this ledger opened (``statements``); once a second, piggybacked on an
    operation, it proves the path still names the file it opened. A store that forgot
    or moved fails this ledger closed for good (its ``Guard``)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        namespace: str = DEFAULT_NAMESPACE,
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
        create: bool = True,
        durability: str = "machine",
    ) -> None:
        target = Target(os.fspath(path), namespace, busy_timeout, create, durability).checked()
        self._target = target
        self._namespace = target.namespace
        self._guard = Guard(FILE_CHECK_PERIOD)
        self._conns = Connections(target)
        self._filesystem = filesystem_of(target.path)  # the mount cannot change under it
        existed = os.path.exists(target.path)
        if not target.create and not existed:
            how = f"run {setup_command(target)} to create it"
            raise missing_store(f"SQLite ledger file {target.path!r}", how)
        # The first connection alone may create the file.
        first = self._conns.connect("rwc" if create else "rw", must_hold_ledger=not create)
        try:
            made = self._open(first)
        finally:
            self._conns.release(first)
        if not existed:
            notices.created(target.location)
        elif made:  # a file that was there, a namespace that was not
            notices.created(target.location, target.namespace)

    def _open(self, conn: _Connection) -> bool:
        """Create the tables and the namespace's genesis when allowed, upgrading a file
        made by an older version in the same transaction (C10's ``holder`` column; a
        genesis row for each namespace holding records, seeded with the file's uuid:
        store_ids stay), then read the genesis and where the file is. Whether this open
        wrote the namespace's genesis."""
        target = self._target
        fresh = None
        try:
            if target.create:
                now = time.time()
                conn.execute(sql.BEGIN_WRITE)
                for statement in sql.SCHEMA:
                    conn.execute(statement)
                if "holder" not in {name for (name,) in conn.execute(sql.COLUMNS)}:
                    conn.execute(sql.ADD_HOLDER)
                conn.execute(sql.CREATE_IDENTITY, (str(uuid.uuid4()),))
                conn.execute(sql.UPGRADE, (now,))
                conn.execute(sql.MARK_LAYOUT)
                fresh = str(uuid.uuid4()).encode()
                conn.execute(sql.CREATE_GENESIS, (target.namespace, fresh, now))
                conn.execute(sql.COMMIT)
            layout, genesis = conn.execute(sql.READ_IDENTITY, (target.namespace,)).fetchone()
        except sqlite3.Error as exc:
            conn.failed(exc)
            raise errors.unavailable("cannot set up", target.path, exc) from exc
        self._file = _stat(target.path)
        if self._file is None:
            raise LedgerUnavailable(f"cannot stat SQLite ledger {target.path!r}")
        if layout is None:
            raise _missing(
                target,
                f"the ledger in {target.path!r} was made by an older version, whose "
                "namespaces have no genesis row (an emptied records table would keep their "
                "store_id)",
            )
        if genesis is None:
            raise _missing(
                target, f"namespace {target.namespace!r} in {target.path!r} has no identity"
            )
        self._genesis = bytes(genesis)  # the namespace's genesis uuid (its store_id)
        self._info = identity.ledger_info(target, self._genesis.decode(), self._filesystem)
        return self._genesis == fresh

    @classmethod
    def open(cls, target: Target) -> SQLiteLedger:
        return cls(target.path, **target.keywords())

    def __enter__(self) -> SQLiteLedger:
        return self

    # -- standing --------------------------------------------------------------------

    def _standing(self) -> None:
        """Raise if failed closed; when the file check is due, prove the path still names
        the file this ledger opened (else fail closed for good). Each operation calls it
        only when ``Guard`` says one of the two may be so (two attribute reads)."""
        guard = self._guard
        guard.check()
        if guard.due() and _stat(self._target.path) != self._file:
            raise guard.fail(identity.moved(self._target))

    def _forgot(self) -> LedgerError:
        return self._guard.fail(identity.forgot(self._target, self._info.store_id))

    def _failed(self, what: str, exc: sqlite3.Error) -> LedgerError:
        """What a failed statement means: the ledger's tables are gone (the store forgot,
        for good), or the store is unavailable."""
        if errors.no_table(exc):
            return self._forgot()
        return LedgerUnavailable(f"{what} failed: {exc}")

    # -- spend, spend_as, is_spent: the hot path ---------------------------------------

    def _spend(self, request_id: bytes, digest: bytes | None = None) -> bool:
        """One guarded insert: the unique key decides the winner; the token is NULL, so
        the insert raises, unless the genesis is the one opened (C6). With ``digest``
        (C10) a row back means this call recorded the id or the same key did before."""
        guard = self._guard
        if guard.failed is not None or time.monotonic() >= guard.next_due:
            self._standing()
        token = new_token()
        params = (self._namespace, request_id, self._genesis, token, time.time())
        conn = self._conns.acquire()
        try:
            if digest is None:
                return conn.hot.execute(sql.SPEND, params).rowcount == 1  # 0: a conflict
            return bool(conn.hot.execute(sql.SPEND_AS, (*params, digest)).fetchall())
        except sqlite3.Error as exc:
            return self._landed(conn, request_id, token, digest, exc)
        finally:
            self._conns.release(conn)

    def _spend_as(self, request_id: bytes, digest: bytes) -> bool:
        return self._spend(request_id, digest)

    def _landed(
        self,
        conn: _Connection,
        request_id: bytes,
        token: bytes,
        digest: bytes | None,
        failure: sqlite3.Error,
    ) -> bool:
        """After a write that raised (a forgotten store: NOT NULL; a lock; an I/O error),
        the row stored decides (C5): our token or the same digest True, another's False,
        none raises."""
        conn.failed(failure)
        try:
            params = (self._namespace, request_id, self._genesis)
            same, stored, holder = conn.execute(sql.READ_BACK, params).fetchone()
        except sqlite3.Error as exc:
            conn.failed(exc)
            if errors.no_table(exc) or errors.no_table(failure):
                raise self._forgot() from failure
            raise AmbiguousSpend(
                f"spend failed ({failure}) and its outcome could not be read ({exc})"
            ) from failure
        if same != 1:
            raise self._forgot() from failure
        if stored is None:
            what = "spend" if digest is None else "spend_as"
            raise LedgerUnavailable(f"{what} did not land: {failure}") from failure
        return bytes(stored) == token or (holder is not None and bytes(holder) == digest)

    def _is_spent(self, request_id: bytes) -> bool:
        """One read that returns a row only while the genesis is the one opened (C3, C6)."""
        guard = self._guard
        if guard.failed is not None or time.monotonic() >= guard.next_due:
            self._standing()
        conn = self._conns.acquire()
        try:
            row: tuple[int] | None = conn.hot.execute(
                sql.IS_SPENT, (self._namespace, request_id, self._genesis)
            ).fetchone()
        except sqlite3.Error as exc:
            conn.failed(exc)
            raise self._failed("is_spent", exc) from exc
        finally:
            self._conns.release(conn)
        if row is None:
            raise self._forgot()
        return row[0] == 1

    # -- batches (migration) -----------------------------------------------------------

    def spend_many(self, request_ids: Sequence[str]) -> list[bool]:
        """Spend a batch in ONE transaction (one fsync), each answer what :meth:`spend`
        would say. Nothing of a failed batch stays (rolled back), except after a failed
        ``COMMIT``: ambiguous."""
        raws = [validate_request_id(r) for r in request_ids]
        self._standing()
        if not raws:
            return []
        token, now = new_token(), time.time()
        done = "begin"  # how far it got: what a failure means depends on it
        try:
            with self._conns.borrowed() as conn:  # rolled back there unless committed
                conn.execute(sql.BEGIN_WRITE)
                done = "spend"
                won = []
                for raw in raws:
                    params = (self._namespace, raw, self._genesis, token, now)
                    won.append(conn.execute(sql.SPEND, params).rowcount == 1)
                done = "commit"
                conn.execute(sql.COMMIT)
        except sqlite3.Error as exc:
            if done == "begin":
                raise LedgerUnavailable(f"spend_many could not begin: {exc}") from exc
            if done == "commit":
                raise AmbiguousSpend(f"spend_many: COMMIT failed, outcome unknown: {exc}") from exc
            if isinstance(exc, sqlite3.IntegrityError) or errors.no_table(exc):
                raise self._forgot() from exc  # the token came out NULL: not our store
            raise LedgerUnavailable(f"spend_many failed (rolled back): {exc}") from exc
        return won

    def _snapshot(self, what: str, read: Callable[[_Connection], T]) -> T:
        """``read``'s statements in one read snapshot together with the proof of the
        identity."""
        self._standing()
        try:
            with self._conns.borrowed() as conn:
                conn.execute(sql.BEGIN)  # one snapshot: the identity and the rows together
                (same,) = conn.execute(sql.SAME_STORE, (self._namespace, self._genesis)).fetchone()
                answer = read(conn)
                conn.execute(sql.COMMIT)
        except sqlite3.Error as exc:
            raise self._failed(what, exc) from exc
        if same != 1:
            raise self._forgot()
        return answer

    def is_spent_many(self, request_ids: Sequence[str]) -> list[bool]:
        """Read a batch in one read transaction."""
        raws = [validate_request_id(r) for r in request_ids]

        def read(conn: _Connection) -> list[Any]:
            params = [(self._namespace, raw, self._genesis) for raw in raws]
            return [conn.execute(sql.IS_SPENT, each).fetchone() for each in params]

        rows = self._snapshot("is_spent_many", read)
        if any(row is None for row in rows):
            raise self._forgot()
        return [row[0] == 1 for row in rows]

    # -- listing -----------------------------------------------------------------------

    def _ids_page(self, after: bytes, page: int) -> tuple[list[str], bytes | None]:
        """One keyset page of this namespace's ids in byte order (markers skipped), and
        where the next page starts (``None``: this was the last)."""
        params = (self._namespace, after, page)
        rows = self._snapshot("scan", lambda conn: conn.execute(sql.SCAN_PAGE, params).fetchall())
        ids = [bytes(raw).decode("utf-8") for (raw,) in rows if not is_marker(bytes(raw))]
        return ids, (bytes(rows[-1][0]) if len(rows) == page else None)

    def _namespaces_page(self, after: str, page: int) -> tuple[list[str], str | None]:
        """The next ``page`` namespaces after ``after`` that hold a row, one primary-key
        seek each, in one snapshot; and where the next page starts (``None``: last)."""

        def seek(conn: _Connection) -> list[str]:
            found: list[str] = []
            while len(found) < page:
                params = (found[-1] if found else after,)
                row = conn.execute(sql.NEXT_NAMESPACE, params).fetchone()
                if row is None or row[0] is None:
                    break
                found.append(str(row[0]))
            return found

        found = self._snapshot("namespaces", seek)
        return found, (None if len(found) < page else found[-1])

    def spent_ids(self, page: int = 1000) -> Iterator[str]:
        """Every id spent in this namespace, in byte order (for ``migrate``)."""
        return pages(lambda after: self._ids_page(after, page), b"")

    def namespaces(self, page: int = 100) -> Iterator[str]:
        """Every namespace in this file that holds a record, each once, in order, this
        ledger's own included (``NamespaceListing``)."""
        return pages(lambda after: self._namespaces_page(after, page), "")

    def lineage(self) -> list[str]:
        """The store_ids this store was migrated from (its lineage markers)."""
        params = (self._namespace, *marker_range(MarkerKind.LINEAGE))
        rows = self._snapshot(
            "lineage", lambda conn: conn.execute(sql.MARKER_RANGE, params).fetchall()
        )
        return [marker_subject(MarkerKind.LINEAGE, bytes(raw)) for (raw,) in rows]

    # -- operations --------------------------------------------------------------------

    def reidentify(self) -> None:
        """A fresh genesis for this namespace, e.g. after a restore (``Reidentifiable``):
        one autocommitted UPDATE over the genesis this ledger opened; every instance,
        this one included, then fails closed (C6)."""
        self._standing()
        fresh = str(uuid.uuid4()).encode()
        params = (fresh, self._namespace, self._genesis, time.time())
        try:
            with self._conns.borrowed() as conn:
                count = conn.execute(sql.REIDENTIFY, params).rowcount
        except sqlite3.Error as exc:
            raise self._failed("reidentify", exc) from exc
        if count != 1:
            raise self._forgot()
        self._forgot()  # this instance too: it names the old identity

    def doctor_checks(self) -> list[Check]:
        """The doctor's re-read of a pooled connection's pragmas (asked, never set)."""
        try:
            with self._conns.borrowed() as conn:
                mode = str(conn.execute("PRAGMA journal_mode").fetchone()[0])
                level = int(conn.execute("PRAGMA synchronous").fetchone()[0])
        except sqlite3.Error as exc:
            raise errors.unavailable("cannot read the settings of", self._target.path, exc) from exc
        versions = sqlite3.sqlite_version, platform.python_version()
        return identity.doctor_checks(self._info, self._filesystem, mode, level, *versions)

    def close(self) -> None:
        self._guard.failed = LedgerClosed(f"{self!r} is closed")  # over any failure
        self._conns.close()


__all__ = ["SQLiteLedger", "Target"]
