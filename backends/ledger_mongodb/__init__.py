"""MongoDB ledgers: one majority, journaled ``insert`` per spend, over ``MongoClient``,
``AsyncMongoClient`` or a host's Motor client. PyMongo is imported only on open
(``MissingDriver`` naming ``pip install 'decision-ledger[mongodb]'`` without it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger_core.lazy import lazy_exports

from .backend import BACKEND

if TYPE_CHECKING:
    from .aio import AsyncMongoLedger
    from .ledger import MongoLedger


__getattr__ = lazy_exports(__name__, {"MongoLedger": ".ledger", "AsyncMongoLedger": ".aio"})


__all__ = ["BACKEND", "AsyncMongoLedger", "MongoLedger"]
