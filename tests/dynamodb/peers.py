"""cachelib's ``DynamoDbCache.add`` as a ledger, for the recorded comparison (not CI):

    pytest --pyargs ledger_conformance --ledger-factory tests.dynamodb.peers:cachelib_factory

``spend`` is ``add(id, 1)`` without expiry, ``is_spent`` is ``has(id)``, one key prefix per
store label; the dynalite endpoint is routed through the suite's fault proxy.
"""

from __future__ import annotations

import atexit
from typing import Any
from urllib.parse import urlsplit

from ledger_conformance import LedgerContext
from tests.dynamodb import tools
from tests.servers import dynamodb as servers

_server: servers.LocalServer | None = None
TABLE = "peer-cachelib"


def _endpoint() -> str:
    global _server
    if _server is None:
        manager = servers.local_dynalite()
        _server = manager.__enter__()
        atexit.register(manager.__exit__, None, None, None)
        client = tools.admin_client(_server.url(TABLE))
        client.create_table(
            TableName=TABLE,
            KeySchema=[{"AttributeName": "cache_key", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "cache_key", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        client.get_waiter("table_exists").wait(TableName=TABLE)
    return _server.endpoint


class CachelibLedger:
    """What a user gets treating ``add`` as "spend once"."""

    def __init__(self, cache: Any) -> None:
        self._cache = cache

    def spend(self, request_id: str) -> bool:
        return bool(self._cache.add(request_id, 1))

    def is_spent(self, request_id: str) -> bool:
        return bool(self._cache.has(request_id))


def cachelib_factory(ctx: LedgerContext) -> Any:
    from botocore.config import Config
    from cachelib.dynamodb import DynamoDbCache

    parts = urlsplit(_endpoint())
    host, port = ctx.route(parts.hostname or "127.0.0.1", parts.port or 80)
    cache = DynamoDbCache(
        table_name=TABLE,
        default_timeout=0,
        key_prefix=f"{tools.RUN}-{ctx.store}:",
        region_name=servers.REGION,
        endpoint_url=f"http://{host}:{port}",
        config=Config(connect_timeout=1, read_timeout=1, retries={"total_max_attempts": 2}),
    )
    return CachelibLedger(cache)
