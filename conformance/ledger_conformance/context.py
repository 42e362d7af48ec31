"""The factory contract: how the suite asks a third party's code for a ledger.

A factory takes one :class:`LedgerContext` and returns a sync or async ledger, an
awaitable resolving to one, or a (sync or async) context manager yielding one.
:func:`enter_factory` turns any of those into an opened ledger plus its cleanup, so
every clause, the child processes and the CLI's preflight open ledgers the same way.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal, TypeVar

Flavor = Literal["sync", "async"]
Route = Callable[[str, int], tuple[str, int]]
Factory = Callable[["LedgerContext"], Any]
Cleanup = Callable[[], Coroutine[Any, Any, None]]


def identity_route(host: str, port: int) -> tuple[str, int]:
    """The route when no fault proxy sits in the path."""
    return host, port


@dataclass(frozen=True)
class LedgerContext:
    """What the suite tells a factory.

    ``store`` is a label: equal labels mean the same backing store through a new ledger
    instance (for the whole test session), a new label means a different store.
    ``route(host, port)`` returns the address to connect to instead, so the suite can
    put its fault proxy in the path. ``flavor`` is the variant the suite would like; a
    factory that has only one may ignore it. ``create``: ``None`` unless the suite asks
    (C6 opening); ``False`` asks for a ledger on a store that exists, and a store that
    does not must be refused (a ``LedgerError``), nothing created. Only a factory that
    says it honours it (an ``offers_create = True`` attribute) is asked.
    """

    store: str
    route: Route = field(default=identity_route, compare=False)
    flavor: Flavor = "sync"
    create: bool | None = None


async def enter_factory(factory: Factory, ctx: LedgerContext) -> tuple[Any, Cleanup]:
    """Call ``factory(ctx)`` and return ``(ledger, cleanup)`` whatever shape it returned.

    Must run on the event loop that will drive an async ledger (drivers bind to it).
    """
    made: Any = factory(ctx)
    if inspect.isawaitable(made):
        made = await made
    if hasattr(made, "__aenter__") and hasattr(made, "__aexit__"):
        manager = made
        ledger = await manager.__aenter__()

        async def exit_async() -> None:
            await manager.__aexit__(None, None, None)

        return _checked(ledger, factory), exit_async
    if hasattr(made, "__enter__") and hasattr(made, "__exit__"):
        manager = made
        ledger = manager.__enter__()

        async def exit_sync() -> None:
            manager.__exit__(None, None, None)

        return _checked(ledger, factory), exit_sync
    from ledger_core.protocol import aclose_ledger  # here: loading the plugin stays light

    ledger = _checked(made, factory)
    return ledger, partial(aclose_ledger, ledger)


F = TypeVar("F", bound=Callable[..., Any])


def offers_create(factory: F) -> F:
    """Mark ``factory`` as honouring ``LedgerContext.create``: C6 opening asks it for a
    store that does not exist with ``create=False`` (a factory not marked is not asked)."""
    setattr(factory, "offers_create", True)  # noqa: B010 (a function's attribute)
    return factory


def create_option(ctx: LedgerContext) -> dict[str, bool]:
    """The ``create`` keyword to pass on to ``open_ledger``: only when the suite asks."""
    return {} if ctx.create is None else {"create": ctx.create}


class NotALedger(TypeError):
    """The factory returned something without a ``spend`` method."""


def _checked(ledger: object, factory: Factory) -> Any:
    if not callable(getattr(ledger, "spend", None)):
        name = getattr(factory, "__qualname__", repr(factory))
        raise NotALedger(
            f"factory {name} returned {type(ledger).__name__}, which has no spend() method"
        )
    return ledger


__all__ = [
    "Cleanup",
    "Factory",
    "Flavor",
    "LedgerContext",
    "NotALedger",
    "Route",
    "create_option",
    "enter_factory",
    "offers_create",
]
