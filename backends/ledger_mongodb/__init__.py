"""MongoDB ledgers: one ``insert`` of ``{_id: namespace+id bytes, t: token}`` per spend,
w="majority" and journaled, over PyMongo's ``MongoClient``, its ``AsyncMongoClient``, or
a host's Motor client.

Importing this package does not import PyMongo; opening a ledger does, and raises
``MissingDriver`` naming ``pip install 'decision-ledger[mongodb]'`` when it is absent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger_core.lazy import lazy_exports

from .backend import BACKEND

if TYPE_CHECKING:
    from .aio import AsyncMongoLedger
    from .ledger import MongoLedger


__getattr__ = lazy_exports(__name__, {"MongoLedger": ".ledger", "AsyncMongoLedger": ".aio"})


__all__ = ["BACKEND", "AsyncMongoLedger", "MongoLedger"]
