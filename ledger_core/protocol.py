"""The two shapes a ledger may take, and what a host may ask of either.

Only ``spend`` is required. ``is_spent`` and ``store_id`` are optional, exactly as in
the reference interface: a ledger without ``store_id`` never proves (H3), and one
without ``is_spent`` makes every failed spend count as spent (H2).
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@runtime_checkable
class DecisionLedger(Protocol):
    """A ledger whose ``spend`` answers directly."""

    def spend(self, request_id: str) -> bool:
        """Record ``request_id``; ``True`` only if THIS call recorded it (C1, C4)."""
        ...


@runtime_checkable
class AsyncDecisionLedger(Protocol):
    """A ledger whose ``spend`` is a coroutine; same semantics (C9)."""

    async def spend(self, request_id: str) -> bool:
        """Record ``request_id``; ``True`` only if THIS call recorded it (C1, C4)."""
        ...


@runtime_checkable
class ReentrantLedger(Protocol):
    """C10 (optional): a ledger whose winner can re-enter under its attempt key."""

    def spend_as(self, request_id: str, attempt_key: str) -> bool:
        """``spend`` recording ``attempt_key`` with the id; ``True`` also when this same
        key recorded it before, ``False`` to every other key and to a plain spend's id."""
        ...


@runtime_checkable
class AsyncReentrantLedger(Protocol):
    """C10, async: ``spend_as`` is a coroutine."""

    async def spend_as(self, request_id: str, attempt_key: str) -> bool: ...


@runtime_checkable
class NamespaceListing(Protocol):
    """Optional: every namespace of the store a ledger lives in that holds a genesis or a
    record (its own included), each once, streamed, so a migration can move them all.
    An async ledger's ``namespaces()`` is an async iterator."""

    def namespaces(self) -> Iterator[str]: ...


def can_reenter(ledger: object) -> bool:
    """Whether the ledger offers ``spend_as`` (C10); the host rules use it when it does."""
    return callable(getattr(ledger, "spend_as", None))


class Durability:
    """What an acknowledged spend survives: the claim behind a ``store_id`` (C2, C6).

    ``MACHINE``, every ``store_id``'s default claim: a crash of the server process and of
    its machine (power loss), as long as the disk survives. ``PROCESS`` (a server-process
    crash only, e.g. a page cache flushed every second) only when the user asks for it
    (``durability=process``). A store that loses spends in a process crash never proves.
    """

    MACHINE = "machine-crash"
    PROCESS = "process-crash"
    NONE = "none"


@dataclass(frozen=True)
class LedgerInfo:
    """What a ledger is and whether it can prove, for people and for the suite.
    ``reason``: why ``store_id`` is ``None`` (C6); ``durability``: see :class:`Durability`."""

    backend: str
    store_id: str | None
    reason: str | None = None
    location: str = ""
    namespace: str = ""
    identity: str = ""
    durability: str = ""


def store_id_of(ledger: object) -> str | None:
    """The ledger's ``store_id`` (absent counts as ``None``); a non-str value is ``None``."""
    value = getattr(ledger, "store_id", None)
    return value if isinstance(value, str) else None


def describe(ledger: object) -> LedgerInfo:
    """The ledger's own ``describe()`` when it has one, else what the protocol shows."""
    own = getattr(ledger, "describe", None)
    if callable(own):
        info = own()
        if isinstance(info, LedgerInfo):
            return info
    store_id = store_id_of(ledger)
    reason = None if store_id is not None else "the ledger has no store_id attribute"
    return LedgerInfo(backend=type(ledger).__name__, store_id=store_id, reason=reason)


def is_async_ledger(ledger: object) -> bool:
    """Whether ``spend`` is a coroutine function (a host must then await it)."""
    spend = getattr(ledger, "spend", None)
    return inspect.iscoroutinefunction(spend)


def close_ledger(ledger: object) -> None:
    """Close what was opened; a ledger without ``close()`` holds nothing to release."""
    close = getattr(ledger, "close", None)
    if callable(close):
        close()


async def aclose_ledger(ledger: object) -> None:
    """``aclose()``, else ``close()`` (awaited when it returns an awaitable), else nothing."""
    for name in ("aclose", "close"):
        close = getattr(ledger, name, None)
        if callable(close):
            result = close()
            if inspect.isawaitable(result):
                await result
            return
