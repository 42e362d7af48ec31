"""redis-py, imported only when a Redis ledger is opened.

``ledger_redis`` must import without the driver (the registry lists schemes without
loading backends), so everything that touches ``redis`` asks this module for it.
"""

from __future__ import annotations

from types import ModuleType

_INSTALL = "pip install 'decision-ledger[redis]'"


def redis_module() -> ModuleType:
    """The ``redis`` package, or :class:`MissingDriver` naming the extra."""
    try:
        import redis
        import redis.asyncio
        import redis.asyncio.cluster
        import redis.asyncio.sentinel
        import redis.backoff
        import redis.cluster
        import redis.retry
        import redis.sentinel
    except ImportError as exc:
        from ledger_core.errors import MissingDriver

        raise MissingDriver(f"the Redis ledger needs redis-py: {_INSTALL}") from exc
    return redis
