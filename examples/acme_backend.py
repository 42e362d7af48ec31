"""The worked example of ``docs/backends.md`` ("Writing a backend"): a third party's ledger
kept in one table per store of a SQLite file, its entry point ``BACKEND`` (so
``open_ledger("acme:///acme.db")`` works once it is registered), and the factory that runs
it through the conformance suite. The tests run this very file through the suite
(``tests/conformance_unit/test_backend_doc.py``), so the guide cannot rot.

Run it: ``ACME_DB=/var/tmp/acme.db pytest --pyargs ledger_conformance
--ledger-factory examples.acme_backend:factory``: the suite finds the restart, forget and
restore hooks on the factory (the forget hook empties every table of that file).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import sqlite3
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from urllib.parse import quote, unquote

from ledger_conformance import LedgerContext
from ledger_core import LedgerInfo, OpenRequest, forks, notices
from ledger_core.base import AsyncReentrantLedgerBase, ReentrantLedgerBase
from ledger_core.errors import (
    AmbiguousSpend,
    InvalidLedgerURL,
    LedgerUnavailable,
    UnsafeStoreConfig,
    missing_store,
)
from ledger_core.guard import Guard
from ledger_core.ids import is_marker
from ledger_core.opening import LocalFaults
from ledger_core.protocol import Durability

_TABLE = re.compile(r"acme_[0-9a-f]{32}")


class AcmeLedger(ReentrantLedgerBase):
    """One table per store, ``(id BLOB PRIMARY KEY, holder BLOB)``, and its genesis (the
    uuid behind ``store_id``) in a table of its own: no id, however odd, can name it.

    Every spend and read proves, in the same statement, that the genesis is still the one
    this instance opened: a store that forgot (its rows deleted in place, its tables
    dropped) is a new store, and an instance that read the genesis once would answer for
    it under the old ``store_id`` (C6). Proven per operation and per store, never once at
    open nor once per file. Once it finds the genesis gone, the instance fails for good.

    The base class validates ids and attempt keys before any I/O (C8, C10), maps any
    exception this code forgot to map to a ``LedgerError``, and adds markers
    (``spend_marker``) on top of ``_spend``/``_is_spent``.
    """

    def __init__(self, path: str, table: str, namespace: str | None = None) -> None:
        if not _TABLE.fullmatch(table):  # a name we derived (factory below), never raw input
            raise InvalidLedgerURL("table must be acme_ + 32 hex digits")
        self._path, self._table = os.path.abspath(path), table
        self._local = threading.local()  # one connection per thread (and per process)
        self._guard = Guard(0)  # failed for good once the store forgot
        try:
            conn = self._conn(create=True)
            conn.execute(f"CREATE TABLE IF NOT EXISTS {table} (id BLOB PRIMARY KEY, holder BLOB)")
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {table}_genesis"
                " (one INTEGER PRIMARY KEY CHECK (one = 1), uuid BLOB NOT NULL)"
            )
            conn.execute(
                f"INSERT OR IGNORE INTO {table}_genesis VALUES (1, ?)", (uuid.uuid4().bytes,)
            )
            (genesis,) = conn.execute(f"SELECT uuid FROM {table}_genesis").fetchone()
        except sqlite3.Error as exc:
            raise LedgerUnavailable(f"acme: cannot open {table}: {exc}") from exc
        self._genesis = bytes(genesis)
        self._info = LedgerInfo(
            backend="acme",
            store_id=f"acme:{uuid.UUID(bytes=self._genesis)}",
            location=f"acme:{self._path}",
            namespace=table if namespace is None else namespace,
            identity="a uuid written by the first opener, in the store's genesis table, "
            "proven by every spend and read",
            durability=Durability.MACHINE,  # WAL with synchronous=FULL: fsync per commit
        )

    def _conn(self, create: bool = False) -> sqlite3.Connection:
        # A new thread, or a forked child (never the parent's connection): an int compare.
        # Only the open may create the file: a later connection to a file that was
        # removed or moved away raises, never starts an empty one.
        if getattr(self._local, "born", None) != forks.generation:
            mode = "rwc" if create else "rw"
            conn = sqlite3.connect(
                f"file:{quote(self._path)}?mode={mode}",
                uri=True,
                timeout=30.0,
                isolation_level=None,
            )
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
            if not _writable(self._path):  # SQLite opened it read-only, silently, for good:
                return conn  # it serves this call alone, and is closed when dropped
            self._local.conn, self._local.born = conn, forks.generation
        current: sqlite3.Connection = self._local.conn
        return current

    def _spend(self, request_id: bytes) -> bool:
        return self._spend_as(request_id, b"")  # a plain spend records no holder

    def _spend_as(self, request_id: bytes, digest: bytes) -> bool:
        """Record the id with its holder in ONE statement that also proves the genesis; a
        second insert (or a forgotten store) inserts nothing, and a read tells which."""
        self._guard.check()
        try:
            inserted = (
                self._conn()
                .execute(
                    f"INSERT OR IGNORE INTO {self._table} (id, holder) SELECT ?, ?"
                    f" WHERE (SELECT uuid FROM {self._table}_genesis) = ?",
                    (request_id, digest, self._genesis),
                )
                .rowcount
            )
        except sqlite3.OperationalError as exc:  # locked, read-only, full: nothing written
            raise LedgerUnavailable(f"acme: spend not recorded: {exc}") from exc
        except sqlite3.Error as exc:  # anything else: it may have landed (C5)
            raise AmbiguousSpend(f"acme: spend outcome unknown: {exc}") from exc
        if inserted == 1:
            return True
        holder = self._read(request_id)  # proves the genesis again: raises if it is gone
        if holder is None:  # not inserted, yet not there: the records went, the genesis stayed
            raise self._guard.fail(UnsafeStoreConfig(f"acme: {self._table} lost a record"))
        return bool(digest) and holder == digest

    def _read(self, request_id: bytes) -> bytes | None:
        """The id's holder (``b""`` for a plain spend) or None, read in one statement with
        the genesis: one snapshot, so a forget cannot fall between the two."""
        self._guard.check()
        try:
            genesis, holder = (
                self._conn()
                .execute(
                    f"SELECT (SELECT uuid FROM {self._table}_genesis),"
                    f" (SELECT holder FROM {self._table} WHERE id = ?)",
                    (request_id,),
                )
                .fetchone()
            )
        except sqlite3.Error as exc:  # a dropped table included: fail closed
            raise LedgerUnavailable(f"acme: read failed: {exc}") from exc
        self._proven(genesis)
        return None if holder is None else bytes(holder)

    def _proven(self, genesis: object) -> None:
        """The genesis read with a call is the one this instance opened, or it fails for good."""
        if not isinstance(genesis, bytes) or genesis != self._genesis:
            raise self._guard.fail(
                UnsafeStoreConfig(
                    f"acme: {self._table} forgot: its genesis is gone or another; this "
                    "instance no longer answers for it (open a new one: a new store_id)"
                )
            )

    def _is_spent(self, request_id: bytes) -> bool:
        return self._read(request_id) is not None

    def spent_ids(self) -> Iterator[str]:
        """L1: every request id of this store, read in one transaction with the genesis;
        markers are not ids."""
        self._guard.check()
        try:
            conn = self._conn()
            conn.execute("BEGIN")  # one snapshot for the genesis and the rows
            try:
                (genesis,) = conn.execute(
                    f"SELECT (SELECT uuid FROM {self._table}_genesis)"
                ).fetchone()
                rows = conn.execute(f"SELECT id FROM {self._table}").fetchall()
            finally:
                conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise LedgerUnavailable(f"acme: listing failed: {exc}") from exc
        self._proven(genesis)
        for (raw,) in rows:
            if not is_marker(bytes(raw)):
                yield bytes(raw).decode("utf-8")

    def reidentify(self) -> None:
        """After a restore (``decision-ledger reidentify``): a fresh genesis, written only
        if it is still the one this instance proves, so every instance opened before fails
        closed on its next call and a new one reports another ``store_id``."""
        self._guard.check()
        try:
            changed = (
                self._conn()
                .execute(
                    f"UPDATE {self._table}_genesis SET uuid = ? WHERE uuid = ?",
                    (uuid.uuid4().bytes, self._genesis),
                )
                .rowcount
            )
        except sqlite3.Error as exc:
            raise LedgerUnavailable(f"acme: reidentify failed: {exc}") from exc
        if changed != 1:
            self._proven(None)  # another genesis already: this instance fails for good

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None and self._local.born == forks.generation:
            conn.close()
            self._local.born = None


def _writable(path: str) -> bool:
    """Whether SQLite opens the file for writing now (not immutable, not a read-only mount,
    its write-ahead log too): ``access`` sees what its ``open`` sees."""
    wal = f"{path}-wal"
    return os.access(path, os.W_OK) and (not os.path.exists(wal) or os.access(wal, os.W_OK))


class AsyncAcmeLedger(AsyncReentrantLedgerBase):
    """The async variant: the same decisions, off the event loop (a local file: no
    network to await). A networked backend writes its ledger once as async code instead
    and generates the sync one from it (``scripts/async_to_sync.py``)."""

    def __init__(self, sync: AcmeLedger) -> None:
        self._sync, self._info = sync, sync.describe()

    async def _spend(self, request_id: bytes) -> bool:
        return await asyncio.to_thread(self._sync._spend, request_id)

    async def _spend_as(self, request_id: bytes, digest: bytes) -> bool:
        return await asyncio.to_thread(self._sync._spend_as, request_id, digest)

    async def _is_spent(self, request_id: bytes) -> bool:
        return await asyncio.to_thread(self._sync._is_spent, request_id)

    async def spent_ids(self) -> AsyncIterator[str]:
        """L1: the sync listing (one snapshot, the genesis proven), off the event loop."""
        for request_id in await asyncio.to_thread(lambda: list(self._sync.spent_ids())):
            yield request_id

    async def aclose(self) -> None:
        self._sync.close()


# -- the entry point: what ``decision_ledger.backends`` names (docs/backends.md) -------
class AcmeBackend:
    """``acme:///relative.db`` or ``acme:////abs.db``; one table per namespace.

    In the package's ``pyproject.toml``::

        [project.entry-points."decision_ledger.backends"]
        acme = "acme_ledger:BACKEND"
    """

    def open(self, request: OpenRequest) -> AcmeLedger:
        request.check({"create"})  # any other option is refused, naming these
        path = unquote(request.url.parts.path)[1:]
        if request.url.parts.netloc or not path:
            raise InvalidLedgerURL(f"{request.url}: use acme:///relative.db or acme:////abs.db")
        existed = os.path.exists(path)
        if not request.create() and not existed:
            raise missing_store(f"acme store {request.url}")  # the message every backend gives
        ledger = AcmeLedger(path, _table(request.namespace), request.namespace)
        if not existed:  # the host's log says so: a mistyped path shows
            notices.created(ledger.describe().location)
        return ledger

    async def open_async(self, request: OpenRequest) -> AsyncAcmeLedger:
        return AsyncAcmeLedger(await asyncio.to_thread(self.open, request))


BACKEND = AcmeBackend()


def _table(label: str) -> str:
    return "acme_" + hashlib.sha256(label.encode("utf-8")).hexdigest()[:32]


# -- the factory the suite calls (docs/backends.md shows this part) -----------------
def factory(ctx: LedgerContext) -> AcmeLedger | AsyncAcmeLedger:
    """A store label may hold any text ("a/b|c. d"): hash it into a safe table name."""
    table = "acme_" + hashlib.sha256(ctx.store.encode("utf-8")).hexdigest()[:32]
    ledger = AcmeLedger(os.environ.get("ACME_DB", "acme-ledger.db"), table)
    return AsyncAcmeLedger(ledger) if ctx.flavor == "async" else ledger


# -- the hooks the suite finds on the factory (docs/conformance.md, "The hooks") -----
def forget(namespace: str | None = None) -> None:
    """The store forgets, in place, as a user emptying its tables would: every row of every
    store in the file, or of the one store ``namespace`` names (the suite's label), its
    genesis with its records, in one transaction. Deletes everything in ``ACME_DB``."""
    conn = sqlite3.connect(os.environ.get("ACME_DB", "acme-ledger.db"), timeout=30.0)
    try:
        with conn:  # one transaction: the identity goes with the records
            tables = [
                name
                for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
                if _TABLE.match(name)
            ]
            if namespace is not None:
                tables = [name for name in tables if name.startswith(_table(namespace))]
            for name in tables:
                conn.execute(f"DELETE FROM {name}")  # a name _TABLE matched: never raw input
    finally:
        conn.close()


def restore(phase: str, namespace: str) -> None:
    """A backup of one store and its restore in place, as an operator would: ``snapshot``
    copies its records and genesis into a file beside ``ACME_DB``; ``restore`` puts them
    back, in one transaction. The genesis comes back too: nothing tells the store."""
    path = os.environ.get("ACME_DB", "acme-ledger.db")
    table = _table(namespace)
    conn = sqlite3.connect(path, timeout=30.0, isolation_level=None)
    try:
        conn.execute("ATTACH DATABASE ? AS backup", (f"{path}.{table}.backup",))
        conn.execute("BEGIN IMMEDIATE")
        for name in (table, f"{table}_genesis"):  # names _table derived: never raw input
            if phase == "snapshot":
                conn.execute(f"DROP TABLE IF EXISTS backup.{name}")
                conn.execute(f"CREATE TABLE backup.{name} AS SELECT * FROM main.{name}")
            else:
                conn.execute(f"DELETE FROM main.{name}")
                conn.execute(f"INSERT INTO main.{name} SELECT * FROM backup.{name}")
        conn.execute("COMMIT")
    finally:
        conn.close()


def after_restore(namespace: str) -> None:
    """The documented step after a restore: ``reidentify`` the restored store."""
    ledger = AcmeLedger(os.environ.get("ACME_DB", "acme-ledger.db"), _table(namespace))
    try:
        ledger.reidentify()
    finally:
        ledger.close()


def restart() -> None:
    """What a file store keeps across a restart is what its files hold: fold the
    write-ahead log into the database file and truncate it, as the last connection's
    close does when every process holding it ends."""
    conn = sqlite3.connect(os.environ.get("ACME_DB", "acme-ledger.db"), timeout=30.0)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()


def local_faults() -> LocalFaults:
    """C4 without a network: the file locked, read-only, full and moved away while the
    suite calls (SQLite's own file faults: the example's store is a SQLite file)."""
    from ledger_sqlite.testing import file_faults  # test support: imported only when asked

    return file_faults(os.environ.get("ACME_DB", "acme-ledger.db"))


factory.ledger_forget = forget  # type: ignore[attr-defined]
factory.ledger_restart = restart  # type: ignore[attr-defined]
factory.ledger_restore = restore  # type: ignore[attr-defined]
factory.ledger_after_restore = after_restore  # type: ignore[attr-defined]
factory.ledger_local_faults = local_faults  # type: ignore[attr-defined]
