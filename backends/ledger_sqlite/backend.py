"""The entry point: ``sqlite:///relative.db`` and ``sqlite:////absolute.db``.

A file has no network address: no ``reroute``, so the suite's network faults say "not
exercised" and its local faults stand in (``local_faults``: ``faults.py``).
No ``setup``: opening with ``create`` (the default) creates the file, or adds what an
older version's file lacks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger_core.opening import OpenRequest

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


BACKEND = _SQLiteBackend()
