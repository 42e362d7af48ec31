"""``mongodb://`` and ``mongodb+srv://`` -> ledgers; the driver is imported only here,
when a ledger is opened (``MissingDriver`` names the extra otherwise)."""

from __future__ import annotations

import functools
from typing import Any

from ledger_core.doctor import Check
from ledger_core.errors import InvalidLedgerURL
from ledger_core.lazy import import_driver
from ledger_core.opening import OpenRequest
from ledger_core.protocol import LedgerInfo
from ledger_core.registry import set_up_by_opening

from .options import Target, parse


def _pymongo() -> Any:
    return import_driver("mongodb", "the MongoDB ledger needs PyMongo 4.x", "pymongo")


def _client(target: Target, cls: Any) -> Any:
    try:
        return cls(target.driver_url, **target.client_kwargs())
    except Exception as exc:
        # A bad value, or PyMongo's ConfigurationError, InvalidURI...: its message may
        # quote the URL, so never repeat it.
        driver = type(exc).__module__.startswith("pymongo")
        if driver or isinstance(exc, ValueError | TypeError | LookupError):
            raise InvalidLedgerURL(
                f"PyMongo cannot use {target.location} ({type(exc).__name__})"
            ) from None
        raise


class _MongoBackend:
    testing = "ledger_mongodb.testing:HOOKS"  # reroute, scratch removal

    def open(self, request: OpenRequest) -> Any:
        target = parse(request)
        pymongo = _pymongo()
        from .ledger import MongoLedger

        make = functools.partial(_client, target, pymongo.MongoClient)  # again in a forked child
        return MongoLedger.open_on(
            make(), target.database, target.settings, target.location, owned=True, rebuild=make
        )

    async def open_async(self, request: OpenRequest) -> Any:
        target = parse(request)
        pymongo = _pymongo()
        from .aio import AsyncMongoLedger

        client = _client(target, pymongo.AsyncMongoClient)
        return await AsyncMongoLedger.open_on(
            client, target.database, target.settings, target.location, owned=True
        )

    def preflight(self, request: OpenRequest) -> list[Check]:
        """``decision-ledger doctor`` on a store not set up yet: the server's settings,
        read as an open reads them; nothing is written."""
        target = parse(request)
        pymongo = _pymongo()
        from .ledger import MongoLedger

        client = _client(target, pymongo.MongoClient)
        ledger = MongoLedger(client, target.database, target.settings, owned=True)
        try:
            return ledger.settings_checks()
        finally:
            ledger.close()

    def setup(self, request: OpenRequest) -> LedgerInfo:
        """The collection and the namespace's genesis, created if missing (idempotent)."""
        return set_up_by_opening(self, request)


BACKEND = _MongoBackend()
