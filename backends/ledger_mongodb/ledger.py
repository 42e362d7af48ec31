"""The sync MongoDB ledger: a thin shell that performs one command per step."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pymongo
from bson.codec_options import CodecOptions
from pymongo import MongoClient, ReadPreference
from pymongo.collection import Collection
from pymongo.database import Database

from ledger_core.base import ReentrantLedgerBase
from ledger_core.doctor import Check
from ledger_core.errors import LedgerClosed
from ledger_core.forks import PerProcess
from ledger_core.listing import pages
from ledger_core.steps import run_steps
from ledger_core.tokens import new_token

from . import decisions, identity
from .commands import Request
from .options import CLIENT_OPTIONS, Settings, client_settings

Rebuild = Callable[[], MongoClient[Any]] | None
# Plain dicts, UUIDs as BSON Binary: the same decoding whatever the host's client says.
CODEC: CodecOptions[dict[str, Any]] = CodecOptions()


class SyncConnection:
    """A client and its database, rebuilt in a forked child (PyMongo is not fork-safe)."""

    def __init__(
        self, client: MongoClient[Any], database: str, *, owned: bool, rebuild: Rebuild = None
    ) -> None:
        self._database = database
        # A host's client: PyMongo's private _duplicate, the only way to a client with its
        # settings, since reusing it in a child "may not be entirely fork-safe" (PyMongo's
        # warning; test_forked_child_rebuilds_its_client[host]).
        self._rebuild = rebuild or client._duplicate
        self.owned = owned
        self._bind(client)
        self._process = PerProcess(None, self._forked)

    def _forked(self) -> None:
        self._bind(self._rebuild())
        self.owned = True

    def _bind(self, client: MongoClient[Any]) -> None:
        self.client = client
        self.db: Database[Any] = client.get_database(self._database)
        self.admin: Database[Any] = client.get_database("admin")

    def check_fork(self) -> None:
        self._process.get()

    def perform(self, request: Request) -> Any:
        return command(self, request)

    def close(self) -> None:
        if self.owned and not self._process.inherited():
            self.client.close()


class MongoLedger(ReentrantLedgerBase):
    """A sync ledger in one MongoDB collection: one majority, journaled ``insert`` per
    spend. Open with ``open_ledger`` or ``from_client``/``from_database``/
    ``from_collection`` (the host's client is never closed by the ledger)."""

    def __init__(self, conn: SyncConnection, store: decisions.Store) -> None:
        self._conn, self._store = conn, store
        self._info = store.info

    @classmethod
    def open_on(cls, conn: SyncConnection, settings: Settings, location: str) -> MongoLedger:
        try:
            steps = decisions.open_steps(settings, conn.db.name, location, time.monotonic())
            store = cls._run(conn, steps)
        except BaseException:
            conn.close()
            raise
        return cls(conn, store)

    @classmethod
    def from_client(
        cls, client: MongoClient[Any], *, database: str | None = None, **options: Any
    ) -> MongoLedger:
        """A ledger on a host's ``MongoClient`` (its default database unless named)."""
        name, settings, where = host_client(client, database, options)
        return cls.open_on(SyncConnection(client, name, owned=False), settings, where)

    @classmethod
    def from_database(cls, database: Database[Any], **options: Any) -> MongoLedger:
        return cls.from_client(database.client, database=database.name, **options)

    @classmethod
    def from_collection(cls, collection: Collection[Any], **options: Any) -> MongoLedger:
        return cls.from_database(collection.database, **of_collection(collection, options))

    def doctor_checks(self) -> list[Check]:
        """From the facts read at open (no I/O)."""
        store = self._store
        assert store.facts is not None  # every open reads them
        durability = store.settings.durability
        return identity.doctor_checks(store.facts, self._info, durability, pymongo.version)

    @staticmethod
    def _run(conn: SyncConnection, steps: decisions.Steps) -> Any:
        conn.check_fork()
        return run_steps(steps, conn.perform)

    def _steps(self, steps: decisions.Steps) -> Any:
        if self._store.closed:
            raise LedgerClosed("this MongoDB ledger was closed")
        return self._run(self._conn, steps)

    def _spend_as(self, request_id: bytes, digest: bytes | None = None) -> bool:
        now = time.monotonic()
        steps = decisions.spend_steps(self._store, request_id, new_token(), now, digest)
        return bool(self._steps(steps))

    _spend = _spend_as  # no digest: a plain spend

    def _is_spent(self, request_id: bytes) -> bool:
        steps = decisions.is_spent_steps(self._store, request_id, time.monotonic())
        return bool(self._steps(steps))

    def spend_many(self, request_ids: Sequence[str]) -> list[bool]:
        """Spend a batch: one unordered insert per 1000 ids, each answer what
        :meth:`spend` would say."""
        batches = decisions.batches(self._store, request_ids, spend=True)
        return [won for steps in batches for won in self._steps(steps)]

    def is_spent_many(self, request_ids: Sequence[str]) -> list[bool]:
        """Read a batch: one ``find`` per 1000 ids."""
        batches = decisions.batches(self._store, request_ids, spend=False)
        return [spent for steps in batches for spent in self._steps(steps)]

    def spent_ids(self) -> Iterator[str]:
        """Every spent request id of this namespace, streamed in pages."""
        return self._pages(decisions.list_steps)

    def namespaces(self) -> Iterator[str]:
        """Every namespace of this collection (each has a genesis), each once, streamed."""
        return self._pages(decisions.namespace_steps)

    def reidentify(self) -> None:
        """A fresh genesis for this namespace, e.g. after a restore (``Reidentifiable``)."""
        self._steps(decisions.reidentify_steps(self._store))

    def _pages(self, page: decisions.Page) -> Iterator[str]:
        return pages(lambda after: self._steps(page(self._store, after, time.monotonic())), None)

    def __enter__(self) -> MongoLedger:
        return self

    def close(self) -> None:
        if not self._store.closed:
            self._store.closed = True
            self._conn.close()


def command(conn: Any, request: Request) -> Any:
    """``request`` on the primary (a coroutine for an async client)."""
    db = conn.admin if request.admin else conn.db
    return db.command(request.command, read_preference=ReadPreference.PRIMARY, codec_options=CODEC)


def of_collection(collection: Any, options: dict[str, Any]) -> dict[str, Any]:
    if "collection" in options:
        raise TypeError("from_collection takes the collection's own name")
    return {**options, "collection": collection.name}


def host_client(
    client: Any, database: str | None, options: dict[str, Any]
) -> tuple[str, Settings, str]:
    """A host's client: the database (its default unless named), our settings, and where
    it points, without any credential."""
    name = database or client.get_default_database("decision_ledger").name
    settings = client_settings(options)
    try:
        nodes = sorted(f"{h}:{p}" for h, p in client.topology_description.server_descriptions())
    except Exception:
        nodes = []
    where = f"mongodb://{','.join(nodes) or '?'}/{name}?collection={settings.collection}"
    return name, settings, where


__all__ = ["CLIENT_OPTIONS", "MongoLedger", "SyncConnection"]
