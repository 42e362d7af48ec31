"""Ledgers on a SQLite file, for the local-fault clause (a store without a network
address): the real ``SQLiteLedger`` as the control, and mutants that only a local fault
shows: "database is locked", a read-only file or a full disk turned into ``False``, a
removed file read as "nothing spent", and a ledger that stays broken once a fault is
over. The factories carry ``ledger_local_faults`` (locked, read-only, full, removed: the
shipped ``ledger_sqlite.testing``). The file is ``LEDGER_ZOO_SQLITE`` (a path), else one
in the temp directory; ``url_backend`` opens a mutant from a URL, for URL-mode runs.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from ledger_conformance import LedgerContext
from ledger_core.errors import LedgerError, LedgerUnavailable
from ledger_core.opening import LocalFaults, OpenRequest
from ledger_core.registry import Backend
from ledger_core.urls import LedgerURL
from ledger_sqlite import BACKEND as SQLITE
from ledger_sqlite import AsyncSQLiteLedger, SQLiteLedger
from ledger_sqlite.options import target
from ledger_sqlite.testing import HOOKS, file_faults

ENV = "LEDGER_ZOO_SQLITE"
# Under the quick profile's 5 s fault, so the mutant sees "locked" and swallows it; well
# over any wait for a busy file under load (1 s was not: the volume clause's contention
# on a loaded machine made the mutant swallow a "locked" outside of any fault).
BUSY_TIMEOUT = 3.0


def zoo_path() -> Path:
    return Path(os.environ.get(ENV) or Path(tempfile.gettempdir()) / "ledger-zoo-local.db")


class _Swallows(SQLiteLedger):
    """A spend failure whose message names ``words`` reads as "already spent"."""

    words: tuple[str, ...] = ()

    def spend(self, request_id: str) -> bool:
        try:
            return super().spend(request_id)
        except LedgerError as exc:
            cause = str(exc).replace(repr(self), "").lower()  # not this class's own name
            if any(word in cause for word in self.words):
                return False
            raise


class SwallowsLocked(_Swallows):
    """A busy file reads as "already spent": ``database is locked`` becomes ``False``."""

    words = ("lock", "busy")


class SwallowsReadOnly(_Swallows):
    """A write-protected file reads as "already spent": ``attempt to write a readonly
    database`` becomes ``False``."""

    words = ("readonly", "read-only")


class SwallowsFull(_Swallows):
    """A full disk reads as "already spent" (``database or disk is full``, I/O errors)."""

    words = ("full", "i/o error")


class RemovedReadsUnspent(SQLiteLedger):
    """No file at the path reads as "nothing spent here" (a shortcut before the read)."""

    def is_spent(self, request_id: str) -> bool:
        if not zoo_path().exists():
            return False
        return super().is_spent(request_id)


class StaysBroken(SQLiteLedger):
    """A breaker that never closes: once a spend failed for a reason other than a busy
    lock (a read-only file, a full disk, a missing file), every later call of this
    instance raises again, long after the file is healthy. Never a wrong answer, but the
    instance never works again (as a pooled read-only connection once made SQLite's)."""

    broken: LedgerError | None = None

    def _check(self) -> None:
        if self.broken is not None:
            raise LedgerUnavailable(f"still failing since: {self.broken}") from self.broken

    def spend(self, request_id: str) -> bool:
        self._check()
        try:
            return super().spend(request_id)
        except LedgerUnavailable as exc:
            if not any(word in str(exc).lower() for word in SwallowsLocked.words):
                self.broken = exc
            raise

    def is_spent(self, request_id: str) -> bool:
        self._check()
        return super().is_spent(request_id)


class LocalFactory:
    """A factory on the zoo's SQLite file that offers its local faults."""

    def __init__(self, cls: type[SQLiteLedger]) -> None:
        self.cls = cls
        self.__name__ = self.__qualname__ = cls.__name__

    @property
    def ledger_local_faults(self) -> LocalFaults:
        return file_faults(zoo_path())  # the path as the run sets it, probed now

    def __call__(self, ctx: LedgerContext) -> Any:
        return self.cls(zoo_path(), namespace=ctx.store, busy_timeout=BUSY_TIMEOUT)


class _URLBackend:
    """``sqlite:``'s backend, but its sync ledger is a mutant (the async one is right):
    a scheme registered at run time puts a mutant behind ``decision-ledger check URL``."""

    def __init__(self, cls: type[SQLiteLedger]) -> None:
        self.cls = cls

    def open(self, request: OpenRequest) -> SQLiteLedger:
        return self.cls.open(target(request))

    async def open_async(self, request: OpenRequest) -> AsyncSQLiteLedger:
        return await SQLITE.open_async(request)

    def local_faults(self, url: LedgerURL) -> LocalFaults:
        return HOOKS.local_faults(url)


def url_backend(cls: type[SQLiteLedger]) -> Backend:
    return _URLBackend(cls)


correct = LocalFactory(SQLiteLedger)
swallows_locked = LocalFactory(SwallowsLocked)
swallows_read_only = LocalFactory(SwallowsReadOnly)
swallows_full = LocalFactory(SwallowsFull)
removed_reads_unspent = LocalFactory(RemovedReadsUnspent)
stays_broken = LocalFactory(StaysBroken)
