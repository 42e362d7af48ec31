"""PyMongo exceptions and the server's replies -> the ledger's errors: not sent, rejected,
or an unknown outcome (a lost reply: a spend settles it, C5). No I/O; messages never
carry a URL's credentials."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pymongo import errors as pm

from ledger_core.errors import (
    AmbiguousSpend,
    LedgerError,
    LedgerUnavailable,
    Outcome,
    UnsafeStoreConfig,
)

# The collection by this name is not the one this ledger opened (MongoDB >= 6.0 with
# ``collectionUUID``), or it is gone.
FORGOT_CODES = frozenset({361, 26})  # CollectionUUIDMismatch, NamespaceNotFound
DUPLICATE_KEY = 11000
NAMESPACE_EXISTS = 48
_CREDENTIALS = re.compile(r"(://)[^@/\s]*@")


class NotPrimary(UnsafeStoreConfig):
    """The server answering is not a writable primary (a direct connection to a member
    that is, or became, a secondary): nothing may be spent or read there."""


def scrub(text: str) -> str:
    return _CREDENTIALS.sub(r"\1***@", text)[:300]


def code_of(exc: BaseException) -> int | None:
    code = getattr(exc, "code", None)
    return code if isinstance(code, int) else None


def classify(exc: BaseException) -> Outcome:
    """What a driver exception says about whether a write may have landed."""
    if isinstance(exc, pm.ServerSelectionTimeoutError | pm.ConfigurationError):
        return Outcome.NOT_SENT
    if isinstance(exc, pm.InvalidOperation):  # a closed client: never sent
        return Outcome.NOT_SENT
    if isinstance(exc, pm.OperationFailure) and not isinstance(exc, pm.ExecutionTimeout):
        if exc.has_error_label("RetryableWriteError") and code_of(exc) in (None, 6, 7, 89, 91):
            return Outcome.UNKNOWN  # a network error the server reports after the fact
        return Outcome.REJECTED
    return Outcome.UNKNOWN  # ConnectionFailure, NetworkTimeout, ExecutionTimeout, ...


def describe(exc: BaseException) -> str:
    code = code_of(exc)
    text = scrub(str(exc).splitlines()[0] if str(exc) else "")
    return f"{type(exc).__name__}{f' (code {code})' if code is not None else ''}: {text}"


def unavailable(what: str, exc: BaseException) -> LedgerError:
    if isinstance(exc, LedgerError):
        return exc
    return LedgerUnavailable(f"MongoDB {what} failed: {describe(exc)}")


def ambiguous(failure: BaseException, settle: BaseException) -> AmbiguousSpend:
    return AmbiguousSpend(
        "MongoDB spend: the reply was lost and settling it failed too, so the write may "
        f"or may not have landed (treat as spent): {describe(failure)}; then {describe(settle)}"
    )


def first_batch(reply: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """A cursor reply's documents (a single-batch ``find``, ``listCollections``...)."""
    cursor = reply.get("cursor") or {}
    return list(cursor.get("firstBatch") or [])


def check_write_concern(reply: Mapping[str, Any], what: str) -> None:
    """A write whose write concern failed may not be durable: unavailable."""
    wce = reply.get("writeConcernError")
    if wce:
        raise LedgerUnavailable(f"MongoDB {what}: write concern failed ({wce.get('code')})")


def unless_duplicate(reply: Mapping[str, Any], what: str) -> None:
    """An insert whose document is there now (ours, or a racing opener's)."""
    codes = {e.get("code") for e in reply.get("writeErrors") or []}
    if codes - {DUPLICATE_KEY}:
        raise LedgerUnavailable(f"MongoDB refused the {what}: {sorted(codes)}")
