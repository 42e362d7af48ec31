"""The worked example of ``docs/backends.md`` ("Writing a backend"): a third party's ledger
kept in one table per store of a SQLite file, its entry point ``BACKEND`` (so
``open_ledger("acme:///acme.db")`` works once it is registered), and the factory that runs
it through the conformance suite. The tests run this very file through the suite
(``tests/conformance_unit/test_backend_doc.py``), so the guide cannot rot.

Run it: ``ACME_DB=/var/tmp/acme.db pytest --pyargs ledger_conformance
--ledger-factory examples.acme_backend:factory``.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import sqlite3
import threading
import uuid
from collections.abc import Iterator
from urllib.parse import unquote

from ledger_conformance import LedgerContext
from ledger_core import LedgerInfo, OpenRequest, forks, notices
from ledger_core.base import AsyncReentrantLedgerBase, ReentrantLedgerBase
from ledger_core.errors import AmbiguousSpend, InvalidLedgerURL, LedgerUnavailable, missing_store
from ledger_core.ids import is_marker
from ledger_core.protocol import Durability

_TABLE = re.compile(r"acme_[0-9a-f]{32}")


class AcmeLedger(ReentrantLedgerBase):
    """One table per store, ``(id BLOB PRIMARY KEY, holder BLOB)``, and its genesis (the
    uuid behind ``store_id``) in a table of its own: no id, however odd, can name it.

    The base class validates ids and attempt keys before any I/O (C8, C10), maps any
    exception this code forgot to map to a ``LedgerError``, and adds markers
    (``spend_marker``) on top of ``_spend``/``_is_spent``.
    """

    def __init__(self, path: str, table: str, namespace: str | None = None) -> None:
        if not _TABLE.fullmatch(table):  # a name we derived (factory below), never raw input
            raise InvalidLedgerURL("table must be acme_ + 32 hex digits")
        self._path, self._table = os.path.abspath(path), table
        self._local = threading.local()  # one connection per thread (and per process)
        try:
            conn = self._conn()
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
        self._info = LedgerInfo(
            backend="acme",
            store_id=f"acme:{uuid.UUID(bytes=genesis)}",
            location=f"acme:{self._path}",
            namespace=table if namespace is None else namespace,
            identity="a uuid written by the first opener, in the store's genesis table",
            durability=Durability.MACHINE,  # WAL with synchronous=FULL: fsync per commit
        )

    def _conn(self) -> sqlite3.Connection:
        # A new thread, or a forked child (never the parent's connection): an int compare.
        if getattr(self._local, "born", None) != forks.generation:
            conn = sqlite3.connect(self._path, timeout=30.0, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
            self._local.conn, self._local.born = conn, forks.generation
        current: sqlite3.Connection = self._local.conn
        return current

    def _spend(self, request_id: bytes) -> bool:
        return self._spend_as(request_id, b"")  # a plain spend records no holder

    def _spend_as(self, request_id: bytes, digest: bytes) -> bool:
        """Record the id with its holder in ONE statement; a second insert tells who holds it."""
        conn = self._conn()
        try:
            inserted = conn.execute(
                f"INSERT OR IGNORE INTO {self._table} VALUES (?, ?)", (request_id, digest)
            ).rowcount
        except sqlite3.OperationalError as exc:  # locked, read-only, full: nothing written
            raise LedgerUnavailable(f"acme: spend not recorded: {exc}") from exc
        except sqlite3.Error as exc:  # anything else: it may have landed (C5)
            raise AmbiguousSpend(f"acme: spend outcome unknown: {exc}") from exc
        if inserted == 1:
            return True
        if not digest:
            return False
        holder = self._read(request_id)
        return holder is not None and holder == digest

    def _read(self, request_id: bytes) -> bytes | None:
        try:
            row = (
                self._conn()
                .execute(f"SELECT holder FROM {self._table} WHERE id = ?", (request_id,))
                .fetchone()
            )
        except sqlite3.Error as exc:
            raise LedgerUnavailable(f"acme: read failed: {exc}") from exc
        return None if row is None else bytes(row[0])

    def _is_spent(self, request_id: bytes) -> bool:
        return self._read(request_id) is not None

    def spent_ids(self) -> Iterator[str]:
        """L1: every request id of this store; markers are not ids."""
        for (raw,) in self._conn().execute(f"SELECT id FROM {self._table}"):
            if not is_marker(bytes(raw)):
                yield bytes(raw).decode("utf-8")

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None and self._local.born == forks.generation:
            conn.close()
            self._local.born = None


class AsyncAcmeLedger(AsyncReentrantLedgerBase):
    """The async variant: the same decisions, off the event loop (a local file: no
    network to await). A networked backend writes its decisions once as step generators
    instead (``ledger_core.steps``) and drives them from both shells."""

    def __init__(self, sync: AcmeLedger) -> None:
        self._sync, self._info = sync, sync.describe()

    async def _spend(self, request_id: bytes) -> bool:
        return await asyncio.to_thread(self._sync._spend, request_id)

    async def _spend_as(self, request_id: bytes, digest: bytes) -> bool:
        return await asyncio.to_thread(self._sync._spend_as, request_id, digest)

    async def _is_spent(self, request_id: bytes) -> bool:
        return await asyncio.to_thread(self._sync._is_spent, request_id)

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
