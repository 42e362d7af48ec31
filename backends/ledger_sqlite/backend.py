"""``sqlite:///relative.db`` and ``sqlite:////absolute.db`` (SQLAlchemy's convention)."""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

from ledger_core.errors import InvalidLedgerURL
from ledger_core.opening import OpenRequest
from ledger_core.urls import LedgerURL

from .ledger import DEFAULT_BUSY_TIMEOUT, AsyncSQLiteLedger, SQLiteLedger

# ``create`` (default true): whether a missing file may become a new, empty ledger.
# The CLI's reads, ``spend`` and a migration's source open with create=false.
# ``durability=process`` accepts a file on tmpfs (lost with the machine) as a proof.
_OPTIONS = {"busy_timeout", "create", "durability"}


def _path(url: LedgerURL) -> str:
    if url.parts.netloc:
        raise InvalidLedgerURL(
            f"{url}: a SQLite URL has no host; use sqlite:///relative.db or sqlite:////abs.db"
        )
    path = unquote(url.parts.path)[1:]
    if not path:
        raise InvalidLedgerURL(f"{url}: no file path (e.g. sqlite:///ledger.db)")
    return path


def _settings(request: OpenRequest) -> dict[str, Any]:
    request.check(_OPTIONS)
    return {
        "namespace": request.namespace,
        "busy_timeout": request.seconds("busy_timeout", DEFAULT_BUSY_TIMEOUT),
        "create": request.create(),
        "durability": str(request.options.get("durability", "machine")),
    }


class _SQLiteBackend:
    """A file has no network address: no ``reroute``, so the suite's network faults say
    "not exercised" and its local faults (the factory's) stand in."""

    def open(self, request: OpenRequest) -> SQLiteLedger:
        return SQLiteLedger(_path(request.url), **_settings(request))

    async def open_async(self, request: OpenRequest) -> AsyncSQLiteLedger:
        return await AsyncSQLiteLedger.open(_path(request.url), **_settings(request))


BACKEND = _SQLiteBackend()
