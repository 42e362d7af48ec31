"""DynamoDB ledgers: one conditional ``PutItem`` of an attempt token, sync and async.

Importing this package imports neither boto3 nor aiobotocore; opening a ledger does, and
raises ``MissingDriver`` naming ``pip install 'decision-ledger[dynamodb]'`` when absent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger_core.lazy import lazy_exports

from .backend import BACKEND

if TYPE_CHECKING:
    from .aio import AsyncDynamoDBLedger
    from .ledger import DynamoDBLedger

__all__ = ["BACKEND", "AsyncDynamoDBLedger", "DynamoDBLedger"]


__getattr__ = lazy_exports(__name__, {"DynamoDBLedger": ".ledger", "AsyncDynamoDBLedger": ".aio"})
