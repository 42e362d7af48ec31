"""The sync SQLite ledger: performs :mod:`.decisions`' requests on pooled connections
(one per concurrent caller; a forked child never uses its parent's)."""

from __future__ import annotations

import contextlib
import ctypes
import os
import platform
import queue
import sqlite3
import threading
import time
import weakref
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from ledger_core import forks, notices
from ledger_core.base import ReentrantLedgerBase
from ledger_core.doctor import Check
from ledger_core.errors import LedgerClosed, missing_store
from ledger_core.ids import DEFAULT_NAMESPACE, validate_request_id
from ledger_core.listing import pages
from ledger_core.steps import Steps, run_steps
from ledger_core.tokens import new_token

from . import decisions, errors, identity
from .commands import Request, Statement, StatFile
from .decisions import Store
from .identity import filesystem_of
from .options import DEFAULT_BUSY_TIMEOUT, Target

R = TypeVar("R")


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


class _Connection(sqlite3.Connection):
    """A pooled connection that remembers whether SQLite may have opened it read-only."""

    read_only = False


def _writable(path: str) -> bool:
    """Whether a file SQLite opens now would be opened for writing: ``access(W_OK)`` sees
    what its ``open(O_RDWR)`` sees (immutable, a read-only mount, permissions) without an
    fd of ours, whose close would drop the process's POSIX locks on the file."""
    wal = f"{path}-wal"
    return os.access(path, os.W_OK) and (not os.path.exists(wal) or os.access(wal, os.W_OK))


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
        try:
            steps = decisions.prepare_steps(self.target, must_hold_ledger=must_hold_ledger)
            run_steps(steps, _Call(self, conn).perform)
        except BaseException:
            conn.close()
            raise
        with self.lock:
            self.all.append(conn)
        return conn

    def open(self, store: Store) -> Any:
        """The first connection (it alone may create the file), then the open decision."""
        target = self.target
        existed = os.path.exists(target.path)
        if not target.create and not existed:
            how = f"run {decisions.setup_command(target)} to create it"
            raise missing_store(f"SQLite ledger file {target.path!r}", how)
        self.idle.put(
            self.connect("rwc" if target.create else "rw", must_hold_ledger=not target.create)
        )
        info = self.run(decisions.open_steps(store, filesystem_of(target.path)))
        if not existed:
            notices.created(target.location)
        elif store.made_namespace:  # a file that was there, a namespace that was not
            notices.created(target.location, target.namespace)
        return info

    def acquire(self) -> _Connection:
        # No fork check here: os.register_at_fork resets the pool in a
        # child before any code of the child can reach it.
        try:
            return self.idle.get_nowait()
        except queue.Empty:
            return self.connect()

    def release(self, conn: _Connection, spoiled: bool) -> None:
        """Pool ``conn`` again, with no transaction left open; close it when spoiled."""
        spoiled = spoiled or conn.read_only
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

    def run(self, steps: Steps[Request, R]) -> R:
        call = _Call(self, None)
        try:
            return run_steps(steps, call.perform)
        finally:
            if call.conn is not None:
                self.release(call.conn, call.spoiled)

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


class _Call:
    """One call's requests, on one connection taken from the pool at its first statement."""

    __slots__ = ("conn", "pool", "spoiled")

    def __init__(self, pool: Connections, conn: _Connection | None) -> None:
        self.pool = pool
        self.conn = conn
        self.spoiled = False

    def perform(self, request: Request) -> Any:
        if type(request) is Statement:
            conn = self.conn
            if conn is None:
                conn = self.conn = self.pool.acquire()
            try:
                cursor = conn.execute(request.sql, request.params)
                fetch = request.fetch
                if fetch == "one":
                    return cursor.fetchone()
                if fetch == "count":
                    return cursor.rowcount
                if fetch == "all":
                    return cursor.fetchall()  # to the end: a RETURNING statement commits there
                return None
            except sqlite3.Error as exc:
                self.spoiled = self.spoiled or errors.spoils_connection(exc)
                raise
        if type(request) is StatFile:
            return _stat(self.pool.target.path)
        time.sleep(request.seconds)  # type: ignore[union-attr]
        return None


class SQLiteLedger(ReentrantLedgerBase):
    """A ledger in one SQLite file (WAL, ``synchronous=FULL``), safe across threads and
    processes; its ``store_id`` is the namespace's genesis (docs/sqlite.md). A copy of
    the file carries the genesis with it: move a ledger with ``migrate``."""

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
        self._store = Store(target)
        self._conns = Connections(target)
        self._info = self._conns.open(self._store)

    @classmethod
    def open(cls, target: Target) -> SQLiteLedger:
        return cls(target.path, **target.keywords())

    def __enter__(self) -> SQLiteLedger:
        return self

    def _spend(self, request_id: bytes) -> bool:
        return self._conns.run(decisions.spend_steps(self._store, request_id, new_token()))

    def _spend_as(self, request_id: bytes, digest: bytes) -> bool:
        return self._conns.run(decisions.spend_steps(self._store, request_id, new_token(), digest))

    def _is_spent(self, request_id: bytes) -> bool:
        return self._conns.run(decisions.is_spent_steps(self._store, request_id))

    def spend_many(self, request_ids: Sequence[str]) -> list[bool]:
        """Spend a batch in ONE transaction (one fsync), each answer what :meth:`spend`
        would say."""
        raws = [validate_request_id(r) for r in request_ids]
        return self._conns.run(decisions.spend_many_steps(self._store, raws, new_token()))

    def is_spent_many(self, request_ids: Sequence[str]) -> list[bool]:
        raws = [validate_request_id(r) for r in request_ids]
        return self._conns.run(decisions.is_spent_many_steps(self._store, raws))

    def _ids_page(self, after: bytes, page: int) -> tuple[list[str], bytes | None]:
        return self._conns.run(decisions.ids_page_steps(self._store, after, page))

    def _namespaces_page(self, after: str, page: int) -> tuple[list[str], str | None]:
        return self._conns.run(decisions.namespaces_page_steps(self._store, after, page))

    def spent_ids(self, page: int = 1000) -> Iterator[str]:
        """Every id spent in this namespace, in byte order (for ``migrate``)."""
        return pages(lambda after: self._ids_page(after, page), b"")

    def namespaces(self, page: int = 100) -> Iterator[str]:
        """Every namespace in this file that holds a record, each once, in order, this
        ledger's own included (``NamespaceListing``)."""
        return pages(lambda after: self._namespaces_page(after, page), "")

    def lineage(self) -> list[str]:
        return self._conns.run(decisions.lineage_steps(self._store))

    def reidentify(self) -> None:
        """A fresh genesis for this namespace, e.g. after a restore (``Reidentifiable``)."""
        self._conns.run(decisions.reidentify_steps(self._store))

    def doctor_checks(self) -> list[Check]:
        mode, level = self._conns.run(decisions.pragmas_steps(self._store))
        versions = sqlite3.sqlite_version, platform.python_version()
        return identity.doctor_checks(self._info, self._store.filesystem, mode, level, *versions)

    def close(self) -> None:
        self._store.guard.failed = LedgerClosed(f"{self!r} is closed")  # over any failure
        self._conns.close()


__all__ = ["SQLiteLedger", "Target"]
