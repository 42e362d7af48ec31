"""The ``dynamodb://`` entry point: URL -> sync or async ledger, and ``setup``."""

from __future__ import annotations

from typing import Any

from ledger_core.doctor import Check
from ledger_core.opening import OpenRequest
from ledger_core.protocol import LedgerInfo
from ledger_core.registry import set_up_by_opening

from .options import parse


class _DynamoDBBackend:
    """``dynamodb://TABLE?region=...&endpoint_url=...&profile=...``."""

    testing = "ledger_dynamodb.testing:HOOKS"

    def preflight(self, request: OpenRequest) -> list[Check]:
        """``decision-ledger doctor`` before ``setup``: the endpoint, the credentials and
        the table's settings when it exists; nothing is created."""
        target = parse(request.with_options(create=False))
        from .ledger import DynamoDBLedger

        return DynamoDBLedger.preflight(target)

    def open(self, request: OpenRequest) -> Any:
        target = parse(request)
        from .ledger import DynamoDBLedger

        return DynamoDBLedger.open(target)

    async def open_async(self, request: OpenRequest) -> Any:
        target = parse(request)
        from .aio import AsyncDynamoDBLedger

        return await AsyncDynamoDBLedger.open(target)

    def setup(self, request: OpenRequest) -> LedgerInfo:
        """Create the table (on-demand, deletion protection on), wait until it is ACTIVE,
        write the namespace's genesis; idempotent."""
        return set_up_by_opening(self, request)


BACKEND = _DynamoDBBackend()

__all__ = ["BACKEND"]
