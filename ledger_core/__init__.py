"""decision-ledger: spend a human decision at most once, and prove when it never ran."""

from __future__ import annotations

from .base import AsyncLedgerBase, LedgerBase
from .errors import (
    AmbiguousSpend,
    InvalidLedgerURL,
    InvalidRequestId,
    LedgerClosed,
    LedgerError,
    LedgerUnavailable,
    MissingDriver,
    UnknownScheme,
    UnsafeStoreConfig,
)
from .host import (
    CloseVerdict,
    Closure,
    LandedVerdict,
    PendingRequest,
    Resolution,
    ResolveVerdict,
    RunVerdict,
    authorize,
    close_pause,
    close_pause_async,
    mint,
    resolve,
    resolve_async,
    spend_landed,
    spend_landed_async,
)
from .ids import (
    DEFAULT_NAMESPACE,
    MAX_ID_BYTES,
    closed_proven_id,
    ledger_key,
    validate_namespace,
    validate_request_id,
)
from .memory import AsyncMemoryLedger, MemoryLedger, MemoryStore, default_ledger
from .migrate import MigrationError, MigrationReport, ScannableLedger, lineage_id, migrate
from .protocol import (
    AsyncDecisionLedger,
    DecisionLedger,
    LedgerInfo,
    describe,
    is_async_ledger,
    store_id_of,
)
from .registry import (
    Backend,
    available_schemes,
    open_async_ledger,
    open_ledger,
    register_backend,
)
from .urls import LedgerURL, redact_url

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_NAMESPACE",
    "MAX_ID_BYTES",
    "AmbiguousSpend",
    "AsyncDecisionLedger",
    "AsyncLedgerBase",
    "AsyncMemoryLedger",
    "Backend",
    "CloseVerdict",
    "Closure",
    "DecisionLedger",
    "InvalidLedgerURL",
    "InvalidRequestId",
    "LandedVerdict",
    "LedgerBase",
    "LedgerClosed",
    "LedgerError",
    "LedgerInfo",
    "LedgerURL",
    "LedgerUnavailable",
    "MemoryLedger",
    "MemoryStore",
    "MigrationError",
    "MigrationReport",
    "MissingDriver",
    "PendingRequest",
    "Resolution",
    "ResolveVerdict",
    "RunVerdict",
    "ScannableLedger",
    "UnknownScheme",
    "UnsafeStoreConfig",
    "authorize",
    "available_schemes",
    "close_pause",
    "close_pause_async",
    "closed_proven_id",
    "default_ledger",
    "describe",
    "is_async_ledger",
    "ledger_key",
    "lineage_id",
    "migrate",
    "mint",
    "open_async_ledger",
    "open_ledger",
    "redact_url",
    "register_backend",
    "resolve",
    "resolve_async",
    "spend_landed",
    "spend_landed_async",
    "store_id_of",
    "validate_namespace",
    "validate_request_id",
]
