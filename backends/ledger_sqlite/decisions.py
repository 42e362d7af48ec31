"""What opening, spending, reading and listing decide, once, as I/O-free step generators
of :mod:`.commands` requests (the async shell runs the sync one's calls: C9). A
transaction left open by a raise is rolled back before the connection is pooled."""

from __future__ import annotations

import shlex
import sqlite3
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ledger_core.errors import AmbiguousSpend, LedgerError, LedgerUnavailable, UnsafeStoreConfig
from ledger_core.guard import Guard
from ledger_core.ids import DEFAULT_NAMESPACE, MarkerKind, is_marker, marker_range, marker_subject
from ledger_core.protocol import LedgerInfo
from ledger_core.steps import Steps

from . import commands as sql
from . import errors, identity
from .commands import Request, Sleep, Statement, StatFile, run
from .options import Target

# How often (seconds, piggybacked on operations) the file at the path is checked to
# still be the one this ledger opened: a pooled connection writing to a deleted or
# replaced file would be writing where no other process looks.
FILE_CHECK_PERIOD = 1.0

T = TypeVar("T")


@dataclass
class Store:
    """One ledger's view of its file, shared by every call (threads, or the async
    ledger's workers): the identity it opened, and whether it failed closed for good."""

    target: Target
    genesis: bytes = b""  # the namespace's genesis uuid this ledger opened (its store_id)
    file: tuple[int, int] | None = None  # (device, inode) the path named at open
    info: LedgerInfo | None = None
    # failed: closed, or failed closed for good; due: the file check
    guard: Guard = field(default_factory=lambda: Guard(FILE_CHECK_PERIOD))
    filesystem: str | None = None  # what the file was on at open (the doctor shows it)
    made_namespace: bool = False  # this open wrote the namespace's genesis (it is logged)

    @property
    def namespace(self) -> str:
        return self.target.namespace

    def forgot(self) -> LedgerError:
        store_id = None if self.info is None else self.info.store_id
        return self.guard.fail(identity.forgot(self.target, store_id))


def setup_command(target: Target) -> str:
    namespace = target.namespace
    named = "" if namespace == DEFAULT_NAMESPACE else f" --namespace {shlex.quote(namespace)}"
    return f"`decision-ledger setup {target.location}{named}` (or open with create=true)"


def missing(target: Target, what: str) -> LedgerUnavailable:
    return LedgerUnavailable(
        f"{what} (create=false: reads and migration sources never create or alter a "
        f"store); run {setup_command(target)} to create it, or to upgrade a file of an "
        "older version"
    )


# -- a new connection, and the first open -------------------------------------------


def prepare_steps(target: Target, *, must_hold_ledger: bool) -> Steps[Request, None]:
    """Make a new connection safe: durability per connection, WAL verified;
    ``must_hold_ledger`` refuses a file without the ledger's tables first (asking for WAL
    would convert another application's database)."""
    try:
        if must_hold_ledger:
            row = yield Statement(sql.HAS_TABLES)
            if row[0] != 2:
                raise missing(target, f"{target.path!r} holds no decision ledger")
        # Durability is per connection: ours are FULL whatever other processes set.
        # WAL is a property of the file; asking for it again verifies it.
        yield run("PRAGMA synchronous=FULL")
        mode = yield from _wal(target)
    except sqlite3.Error as exc:
        raise errors.unavailable("cannot open", target.path, exc) from exc
    if mode.lower() != "wal":
        raise UnsafeStoreConfig(f"SQLite refused WAL mode for {target.path!r} ({mode})")


def _wal(target: Target) -> Steps[Request, str]:
    """Put the file in WAL mode and return the mode SQLite reports. Switching answers
    BUSY at once, without the busy handler, while others create the file: so this waits
    as the handler would, within ``busy_timeout``."""
    deadline = time.monotonic() + target.busy_timeout
    pause = 0.001
    while True:
        try:
            row = yield Statement("PRAGMA journal_mode")
            if str(row[0]).lower() == "wal":
                return str(row[0])
            row = yield Statement("PRAGMA journal_mode=WAL")
            return str(row[0])
        except sqlite3.OperationalError as exc:
            if not errors.busy(exc) or time.monotonic() + pause > deadline:
                raise
        yield Sleep(pause)
        pause = min(pause * 2, 0.05)


def open_steps(store: Store, filesystem: str | None) -> Steps[Request, LedgerInfo]:
    """Create the tables and the namespace's genesis when allowed, upgrading a file made
    by an older version in the same transaction (C10's ``holder`` column; a genesis row
    for each namespace holding records, seeded with the file's uuid: store_ids stay),
    then read the genesis and where the file is."""
    target = store.target
    fresh = None
    try:
        if target.create:
            now = time.time()
            yield run(sql.BEGIN_WRITE)
            for statement in sql.SCHEMA:
                yield run(statement)
            columns = yield Statement(sql.COLUMNS, fetch="all")
            if "holder" not in {name for (name,) in columns}:
                yield run(sql.ADD_HOLDER)
            yield Statement(sql.CREATE_IDENTITY, (str(uuid.uuid4()),), "none")
            yield Statement(sql.UPGRADE, (now,), "none")
            yield run(sql.MARK_LAYOUT)
            fresh = str(uuid.uuid4()).encode()
            yield Statement(sql.CREATE_GENESIS, (target.namespace, fresh, now), "none")
            yield run(sql.COMMIT)
        layout, genesis = yield Statement(sql.READ_IDENTITY, (target.namespace,))
    except sqlite3.Error as exc:
        raise errors.unavailable("cannot set up", target.path, exc) from exc
    where = yield StatFile()
    if where is None:
        raise LedgerUnavailable(f"cannot stat SQLite ledger {target.path!r}")
    if layout is None:
        raise missing(
            target,
            f"the ledger in {target.path!r} was made by an older version, whose namespaces "
            "have no genesis row (an emptied records table would keep their store_id)",
        )
    if genesis is None:
        raise missing(target, f"namespace {target.namespace!r} in {target.path!r} has no identity")
    store.genesis, store.file, store.filesystem = bytes(genesis), where, filesystem
    store.made_namespace = bytes(genesis) == fresh
    store.info = identity.ledger_info(target, store.genesis.decode(), filesystem)
    return store.info


# -- every operation -----------------------------------------------------------------


def _due(store: Store) -> bool:
    """Raise if failed closed; whether the file check is due. Called before any generator:
    the check is rarely due, and a generator per call cost 4-9% of a read."""
    store.guard.check()
    return store.guard.due()


def _file_steps(store: Store) -> Steps[Request, None]:
    """Prove the path still names the file this ledger opened (else fail closed for good)."""
    where = yield StatFile()
    if where != store.file:
        raise store.guard.fail(identity.moved(store.target))


def _read_back(store: Store, request_id: bytes, failure: Exception) -> Steps[Request, Any]:
    """After a write that raised: the row that says whose record is there (C5)."""
    try:
        row = yield Statement(sql.READ_BACK, (store.namespace, request_id, store.genesis))
    except sqlite3.Error as exc:
        if errors.no_table(exc) or errors.no_table(failure):
            raise store.forgot() from failure
        raise AmbiguousSpend(
            f"spend failed ({failure}) and its outcome could not be read ({exc})"
        ) from failure
    if row[0] != 1:
        raise store.forgot() from failure
    return row


def spend_steps(
    store: Store, request_id: bytes, token: bytes, digest: bytes | None = None
) -> Steps[Request, bool]:
    """One guarded insert (C10 with ``digest``: a row back means this call recorded the id
    or the same key did before). When it raises (a forgotten store: NOT NULL; a lock; an
    I/O error), the row stored decides: our token or the same digest True, another's
    False, none raises."""
    if _due(store):
        yield from _file_steps(store)
    params = (store.namespace, request_id, store.genesis, token, time.time())
    try:
        if digest is None:
            return bool((yield Statement(sql.SPEND, params, "count")) == 1)  # 0: a conflict
        return bool((yield Statement(sql.SPEND_AS, (*params, digest), "all")))
    except sqlite3.Error as exc:
        failure = exc
    _, stored, holder = yield from _read_back(store, request_id, failure)
    if stored is None:
        what = "spend" if digest is None else "spend_as"
        raise LedgerUnavailable(f"{what} did not land: {failure}") from failure
    return bytes(stored) == token or (holder is not None and bytes(holder) == digest)


def is_spent_steps(store: Store, request_id: bytes) -> Steps[Request, bool]:
    """One read that returns a row only while the genesis is the one opened (C3, C6)."""
    if _due(store):
        yield from _file_steps(store)
    try:
        row = yield Statement(sql.IS_SPENT, (store.namespace, request_id, store.genesis))
    except sqlite3.Error as exc:
        if errors.no_table(exc):
            raise store.forgot() from exc
        raise LedgerUnavailable(f"is_spent failed: {exc}") from exc
    if row is None:
        raise store.forgot()
    return bool(row[0] == 1)


def reidentify_steps(store: Store) -> Steps[Request, None]:
    """A new random genesis over the one this ledger opened (one autocommitted UPDATE):
    every instance, this one included, then fails closed (C6, after a restore)."""
    if _due(store):
        yield from _file_steps(store)
    fresh = str(uuid.uuid4()).encode()
    params = (fresh, store.namespace, store.genesis, time.time())
    try:
        count = yield Statement(sql.REIDENTIFY, params, "count")
    except sqlite3.Error as exc:
        if errors.no_table(exc):
            raise store.forgot() from exc
        raise LedgerUnavailable(f"reidentify failed: {exc}") from exc
    if count != 1:
        raise store.forgot()
    store.forgot()  # this instance too: it names the old identity


# -- batches (migration) -------------------------------------------------------------


def spend_many_steps(
    store: Store, request_ids: Sequence[bytes], token: bytes
) -> Steps[Request, list[bool]]:
    """The spend statement per id in ONE transaction (one fsync). Nothing of a failed
    batch stays (rolled back), except after a failed ``COMMIT``: ambiguous."""
    if _due(store):
        yield from _file_steps(store)
    if not request_ids:
        return []
    now, namespace, genesis = time.time(), store.namespace, store.genesis
    try:
        yield run(sql.BEGIN_WRITE)
    except sqlite3.Error as exc:
        raise LedgerUnavailable(f"spend_many could not begin: {exc}") from exc
    won: list[bool] = []
    try:
        for raw in request_ids:
            count = yield Statement(sql.SPEND, (namespace, raw, genesis, token, now), "count")
            won.append(count == 1)
    except sqlite3.Error as exc:
        if isinstance(exc, sqlite3.IntegrityError) or errors.no_table(exc):
            raise store.forgot() from exc  # the token came out NULL: not the store we opened
        raise LedgerUnavailable(f"spend_many failed (rolled back): {exc}") from exc
    try:
        yield run(sql.COMMIT)
    except sqlite3.Error as exc:
        raise AmbiguousSpend(f"spend_many: COMMIT failed, outcome unknown: {exc}") from exc
    return won


def _snapshot(store: Store, body: Steps[Request, T], what: str) -> Steps[Request, T]:
    """``body``'s reads in one read snapshot together with the proof of the identity."""
    if _due(store):
        yield from _file_steps(store)
    try:
        yield run(sql.BEGIN)  # one snapshot: the identity and the rows together
        same = yield Statement(sql.SAME_STORE, (store.namespace, store.genesis))
        answer = yield from body
        yield run(sql.COMMIT)
    except sqlite3.Error as exc:
        if errors.no_table(exc):
            raise store.forgot() from exc
        raise LedgerUnavailable(f"{what} failed: {exc}") from exc
    if same[0] != 1:
        raise store.forgot()
    return answer


def _each(reads: Sequence[Statement]) -> Steps[Request, list[Any]]:
    answers = []
    for read in reads:
        answers.append((yield read))
    return answers


def is_spent_many_steps(store: Store, request_ids: Sequence[bytes]) -> Steps[Request, list[bool]]:
    """Read a batch in one read transaction."""
    reads = [Statement(sql.IS_SPENT, (store.namespace, raw, store.genesis)) for raw in request_ids]
    rows = yield from _snapshot(store, _each(reads), "is_spent_many")
    if any(row is None for row in rows):
        raise store.forgot()
    return [bool(row[0] == 1) for row in rows]


# -- listing -------------------------------------------------------------------------


def ids_page_steps(
    store: Store, after: bytes, page: int
) -> Steps[Request, tuple[list[str], bytes | None]]:
    """One keyset page of this namespace's ids in byte order (markers skipped), and where
    the next page starts (``None``: this was the last)."""
    read = Statement(sql.SCAN_PAGE, (store.namespace, after, page), "all")
    (rows,) = yield from _snapshot(store, _each([read]), "scan")
    ids = [bytes(raw).decode("utf-8") for (raw,) in rows if not is_marker(bytes(raw))]
    return ids, (bytes(rows[-1][0]) if len(rows) == page else None)


def lineage_steps(store: Store) -> Steps[Request, list[str]]:
    """The store_ids this store was migrated from (its lineage markers)."""
    low, high = marker_range(MarkerKind.LINEAGE)
    read = Statement(sql.MARKER_RANGE, (store.namespace, low, high), "all")
    (rows,) = yield from _snapshot(store, _each([read]), "lineage")
    return [marker_subject(MarkerKind.LINEAGE, bytes(raw)) for (raw,) in rows]


def namespaces_page_steps(
    store: Store, after: str, page: int
) -> Steps[Request, tuple[list[str], str | None]]:
    """The next ``page`` namespaces after ``after`` that hold a row, one primary-key seek
    each, in one snapshot; and where the next page starts (``None``: last)."""
    found = yield from _snapshot(store, _seek(after, page), "namespaces")
    return found, (None if len(found) < page else found[-1])


def _seek(after: str, page: int) -> Steps[Request, list[str]]:
    found: list[str] = []
    while len(found) < page:
        row = yield Statement(sql.NEXT_NAMESPACE, (found[-1] if found else after,))
        if row is None or row[0] is None:
            break
        found.append(str(row[0]))
    return found


def pragmas_steps(store: Store) -> Steps[Request, tuple[str, int]]:
    """The doctor's re-read of a pooled connection's pragmas (asked, never set)."""
    try:
        mode = yield Statement("PRAGMA journal_mode")
        level = yield Statement("PRAGMA synchronous")
    except sqlite3.Error as exc:
        raise errors.unavailable("cannot read the settings of", store.target.path, exc) from exc
    return str(mode[0]), int(level[0])
