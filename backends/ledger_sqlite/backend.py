"""The entry point: ``sqlite:///relative.db`` and ``sqlite:////absolute.db``. No
``reroute`` (a file has no address: local faults stand in) and no ``setup`` (opening
with ``create``, the default, creates the file or upgrades an older one)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ledger_core.doctor import Check, Fact
from ledger_core.opening import OpenRequest
from ledger_core.protocol import Durability

from .identity import VOLATILE_FILESYSTEMS, filesystem_of
from .options import target

if TYPE_CHECKING:
    from .aio import AsyncSQLiteLedger
    from .ledger import SQLiteLedger


class _SQLiteBackend:
    testing = "ledger_sqlite.testing:HOOKS"  # local faults, scratch removal

    def preflight(self, request: OpenRequest) -> list[Check]:
        """``decision-ledger doctor`` before the file exists: where it would be made."""
        found = target(request)
        directory = os.path.dirname(found.path)
        filesystem = filesystem_of(found.path)
        volatile = filesystem in VOLATILE_FILESYSTEMS and found.durability != Durability.PROCESS
        return [
            Fact.judged(
                os.path.isdir(directory) and os.access(directory, os.W_OK | os.X_OK),
                f"directory {directory} exists and is writable",
                f"directory {directory} does not exist or is not writable",
                "create it, or give a path in a directory the ledger's user may write",
            ).check(),
            Fact.judged(
                not volatile,
                f"filesystem {filesystem or 'unknown (taken as a disk)'}",
                f"filesystem {filesystem}: a ledger there would never prove (lost with the "
                "machine)",
                "put the file on a disk, or accept the risk with durability=process",
            ).check(),
        ]

    def open(self, request: OpenRequest) -> SQLiteLedger:
        from .ledger import SQLiteLedger

        return SQLiteLedger.open(target(request))

    async def open_async(self, request: OpenRequest) -> AsyncSQLiteLedger:
        from .aio import AsyncSQLiteLedger

        found = target(request)
        return await AsyncSQLiteLedger.open(found.path, **found.keywords())


BACKEND = _SQLiteBackend()
