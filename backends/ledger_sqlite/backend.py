"""The entry point: ``sqlite:///relative.db`` and ``sqlite:////absolute.db``. No
``reroute`` (a file has no address: local faults stand in) and no ``setup`` (opening
with ``create``, the default, creates the file or upgrades an older one)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger_core.opening import OpenRequest

from .options import target

if TYPE_CHECKING:
    from .aio import AsyncSQLiteLedger
    from .ledger import SQLiteLedger


class _SQLiteBackend:
    testing = "ledger_sqlite.testing:HOOKS"  # local faults, scratch removal

    def open(self, request: OpenRequest) -> SQLiteLedger:
        from .ledger import SQLiteLedger

        return SQLiteLedger.open(target(request))

    async def open_async(self, request: OpenRequest) -> AsyncSQLiteLedger:
        from .aio import AsyncSQLiteLedger

        found = target(request)
        return await AsyncSQLiteLedger.open(found.path, **found.keywords())


BACKEND = _SQLiteBackend()
