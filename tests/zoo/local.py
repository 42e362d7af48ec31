"""Ledgers on a SQLite file, for the local-fault clause (a store without a network
address): the real ``SQLiteLedger`` as the control, and a mutant that turns "database is
locked" into ``False``. The factories carry ``ledger_local_faults``: ``locked`` holds an
exclusive lock on the file from another connection while the fault lasts. The file is
``LEDGER_ZOO_SQLITE`` (a path), else one in the temp directory.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ledger_conformance import LedgerContext
from ledger_core.errors import LedgerError
from ledger_sqlite import SQLiteLedger

ENV = "LEDGER_ZOO_SQLITE"
# Under the quick profile's 5 s fault, so the mutant sees "locked" and swallows it; well
# over any wait for a busy file under load (1 s was not: the volume clause's contention
# on a loaded machine made the mutant swallow a "locked" outside of any fault).
BUSY_TIMEOUT = 3.0


def zoo_path() -> Path:
    return Path(os.environ.get(ENV) or Path(tempfile.gettempdir()) / "ledger-zoo-local.db")


@contextlib.contextmanager
def locked() -> Iterator[None]:
    """Another connection holds the file's exclusive lock (a backup, a long writer)."""
    conn = sqlite3.connect(zoo_path(), isolation_level=None, timeout=30.0)
    try:
        conn.execute("BEGIN EXCLUSIVE")
        yield
        conn.execute("ROLLBACK")
    finally:
        conn.close()


class SwallowsLocked(SQLiteLedger):
    """A busy file reads as "already spent": ``database is locked`` becomes ``False``."""

    def spend(self, request_id: str) -> bool:
        try:
            return super().spend(request_id)
        except LedgerError as exc:
            if "lock" in str(exc).lower() or "busy" in str(exc).lower():
                return False
            raise


class LocalFactory:
    """A factory on the zoo's SQLite file that offers its local faults."""

    def __init__(self, cls: type[SQLiteLedger]) -> None:
        self.cls = cls
        self.__name__ = self.__qualname__ = cls.__name__
        self.ledger_local_faults = {"locked": locked}

    def __call__(self, ctx: LedgerContext) -> Any:
        return self.cls(zoo_path(), namespace=ctx.store, busy_timeout=BUSY_TIMEOUT)


correct = LocalFactory(SQLiteLedger)
swallows_locked = LocalFactory(SwallowsLocked)
