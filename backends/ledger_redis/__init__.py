"""Redis ledgers: one genesis-proving Lua script per spend or read (an attempt token
written ``SET NX GET``-style), sync and async, standalone and Cluster.

Importing this package does not import redis-py; opening a ledger does, and raises
``MissingDriver`` naming ``pip install 'decision-ledger[redis]'`` when it is absent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger_core.lazy import lazy_exports

from .backend import BACKEND, CLUSTER_BACKEND, SENTINEL_BACKEND
from .errors import ReplyLost
from .options import RedisOptions

if TYPE_CHECKING:
    from .aio import AsyncRedisLedger
    from .ledger import RedisLedger

__all__ = [
    "BACKEND",
    "CLUSTER_BACKEND",
    "SENTINEL_BACKEND",
    "AsyncRedisLedger",
    "RedisLedger",
    "RedisOptions",
    "ReplyLost",
]


__getattr__ = lazy_exports(__name__, {"RedisLedger": ".ledger", "AsyncRedisLedger": ".aio"})
