"""The entry point: ``sqlite:///relative.db`` and ``sqlite:////absolute.db``.

A file has no network address: no ``reroute``, so the suite's network faults say "not
exercised" and its local faults stand in (``local_faults``: ``faults.py``).
No ``setup``: opening with ``create`` (the default) creates the file, or adds what an
older version's file lacks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger_core.opening import OpenRequest
from ledger_core.scratch import prefix_bounds
from ledger_core.urls import LedgerURL

from .options import target

if TYPE_CHECKING:
    from ledger_core.opening import LocalFaults
    from ledger_core.urls import LedgerURL

    from .aio import AsyncSQLiteLedger
    from .ledger import SQLiteLedger


class _SQLiteBackend:
    def local_faults(self, url: LedgerURL) -> LocalFaults:
        """The faults the conformance suite may put the URL's file through (C4 for a
        store without an address), on the path this backend opens for ``url``."""
        from .faults import url_faults

        return url_faults(url)

    def open(self, request: OpenRequest) -> SQLiteLedger:
        from .ledger import SQLiteLedger

        return SQLiteLedger.open(target(request))

    async def open_async(self, request: OpenRequest) -> AsyncSQLiteLedger:
        from .aio import AsyncSQLiteLedger

        return await AsyncSQLiteLedger.open_target(target(request))

    def remove_scratch(self, url: LedgerURL, prefix: str) -> int:
        """Delete every row (ids and markers) of the namespaces named ``prefix...`` (a
        check's own scratch prefix, else refused before any I/O) in one write
        transaction; say how many namespaces. The file is never created; each removed
        namespace's genesis goes with it (its open ledgers fail closed)."""
        import sqlite3
        from pathlib import Path

        from . import commands as sql
        from .errors import unavailable

        bounds = prefix_bounds(prefix)
        found = target(OpenRequest.build(url, create=False))
        try:
            conn = sqlite3.connect(
                f"{Path(found.path).as_uri()}?mode=rw",
                uri=True,
                timeout=found.busy_timeout,
                isolation_level=None,
            )
        except sqlite3.Error as exc:
            raise unavailable("cannot open", found.path, exc) from exc
        try:
            conn.execute(sql.BEGIN_WRITE)
            (count,) = conn.execute(sql.COUNT_SCRATCH, bounds).fetchone()
            conn.execute(sql.DELETE_SCRATCH, bounds)
            conn.execute(sql.COMMIT)
            return int(count)
        except sqlite3.Error as exc:
            raise unavailable("cannot remove scratch namespaces from", found.path, exc) from exc
        finally:
            conn.close()  # a transaction left open is rolled back


BACKEND = _SQLiteBackend()
