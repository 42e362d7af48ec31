"""``sqlite:///relative.db`` and ``sqlite:////absolute.db`` (SQLAlchemy's convention)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote

from ledger_core.errors import InvalidLedgerURL
from ledger_core.urls import LedgerURL, check_options, option_bool, option_float

from .ledger import DEFAULT_BUSY_TIMEOUT, AsyncSQLiteLedger, SQLiteLedger

# ``create`` (default true): whether a missing file may become a new, empty ledger.
# The CLI's reads, ``spend`` and a migration's source open with create=false.
# ``durability=process`` accepts a file on tmpfs (lost with the machine) as a proof.
_OPTIONS = {"namespace", "busy_timeout", "create", "durability"}


def _path(url: LedgerURL) -> str:
    if url.parts.netloc:
        raise InvalidLedgerURL(
            f"{url}: a SQLite URL has no host; use sqlite:///relative.db or sqlite:////abs.db"
        )
    path = unquote(url.parts.path)[1:]
    if not path:
        raise InvalidLedgerURL(f"{url}: no file path (e.g. sqlite:///ledger.db)")
    return path


class _SQLiteBackend:
    def open(self, url: LedgerURL, options: Mapping[str, Any]) -> SQLiteLedger:
        check_options(url, options, _OPTIONS)
        return SQLiteLedger(
            _path(url),
            namespace=options["namespace"],
            busy_timeout=option_float(options, "busy_timeout", DEFAULT_BUSY_TIMEOUT),
            create=option_bool(options, "create", True),
            durability=str(options.get("durability", "machine")),
        )

    async def open_async(self, url: LedgerURL, options: Mapping[str, Any]) -> AsyncSQLiteLedger:
        check_options(url, options, _OPTIONS)
        return await AsyncSQLiteLedger.open(
            _path(url),
            namespace=options["namespace"],
            busy_timeout=option_float(options, "busy_timeout", DEFAULT_BUSY_TIMEOUT),
            create=option_bool(options, "create", True),
            durability=str(options.get("durability", "machine")),
        )


BACKEND = _SQLiteBackend()
