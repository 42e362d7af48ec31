"""Redis ledgers: one genesis-proving Lua script per spend or read (an attempt token
written ``SET NX GET``-style), sync and async, standalone and Cluster.

Importing this package does not import redis-py; opening a ledger does, and raises
``MissingDriver`` naming ``pip install 'decision-ledger[redis]'`` when it is absent.
"""

from __future__ import annotations

from .backend import BACKEND, CLUSTER_BACKEND
from .ledger import AsyncRedisLedger, RedisLedger
from .rules import RedisOptions, ReplyLost

__all__ = [
    "BACKEND",
    "CLUSTER_BACKEND",
    "AsyncRedisLedger",
    "RedisLedger",
    "RedisOptions",
    "ReplyLost",
]
