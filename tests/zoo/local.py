"""Ledgers on a SQLite file, for the local-fault clause (a store without a network
address): the real ``SQLiteLedger`` as the control, and mutants that only a local fault
shows: "database is locked", a read-only file or a full disk turned into ``False``, and
a removed file read as "nothing spent". The factories carry ``ledger_local_faults``
(locked, read-only, full, removed: ``tests/sqlite/faults.py``). The file is
``LEDGER_ZOO_SQLITE`` (a path), else one in the temp directory.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from ledger_conformance import LedgerContext
from ledger_core.errors import LedgerError
from ledger_sqlite import SQLiteLedger
from tests.sqlite.faults import file_faults

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
            if any(word in str(exc).lower() for word in self.words):
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


def _fault(name: str) -> Callable[[], AbstractContextManager[None]]:
    return lambda: file_faults(zoo_path())[name]()  # the path as the run sets it


class LocalFactory:
    """A factory on the zoo's SQLite file that offers its local faults."""

    def __init__(self, cls: type[SQLiteLedger]) -> None:
        self.cls = cls
        self.__name__ = self.__qualname__ = cls.__name__
        self.ledger_local_faults = {name: _fault(name) for name in file_faults(Path())}

    def __call__(self, ctx: LedgerContext) -> Any:
        return self.cls(zoo_path(), namespace=ctx.store, busy_timeout=BUSY_TIMEOUT)


correct = LocalFactory(SQLiteLedger)
swallows_locked = LocalFactory(SwallowsLocked)
swallows_read_only = LocalFactory(SwallowsReadOnly)
swallows_full = LocalFactory(SwallowsFull)
removed_reads_unspent = LocalFactory(RemovedReadsUnspent)
