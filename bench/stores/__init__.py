"""What each store brings to the one bench: its server, its raw call, its peers.

A store module has ``NAME``, ``SCHEMES``, ``UNAVAILABLE`` (the harness's "no server here"
exception), ``server()`` (a context manager yielding a URL, from ``tests/servers``) and
``subject(url, stack)``: the ledger and, on the same connection or pool, the raw driver
primitive a host would write by hand, plus the peer libraries that are installed. Nothing
else is store-specific: timing, rounds and the report live in ``bench.measure`` and
``bench.report``.
"""

from __future__ import annotations

import importlib
import importlib.metadata
from collections.abc import Callable, Iterator
from contextlib import AbstractAsyncContextManager, AbstractContextManager, ExitStack
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Protocol

from bench.measure import AsyncContender, Bar, Contender
from ledger_core.opening import OpenRequest

ORDER = ("sqlite", "redis", "postgres", "mongodb", "dynamodb")
NAMESPACE = "bench"  # the ledger's namespace; the raw call writes beside it, in the same store


@dataclass
class Subject:
    """One store under test.

    ``preload(numbers)`` adds one id per number (``pre-<n>``, beside the ledger's own) by
    the store's fastest bulk path, so the cost of a call can be read against how many ids
    are already stored; ``open_async`` yields the
    async contenders (made inside the running event loop), or is ``None``. ``bars``:
    what an operation must reach where it is not the default (0.95 of the raw call).
    """

    store: str
    server: str
    contenders: list[Contender]
    preload: Callable[[range], None]
    open_async: Callable[[], AbstractAsyncContextManager[list[AsyncContender]]] | None
    versions: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    bars: dict[str, Bar] = field(default_factory=dict)

    def bar(self, operation: str) -> Bar:
        return self.bars.get(operation, Bar())


class StoreModule(Protocol):
    NAME: str
    SCHEMES: tuple[str, ...]
    UNAVAILABLE: type[Exception]

    def server(self) -> AbstractContextManager[str]: ...

    def subject(self, url: str, stack: ExitStack) -> Subject: ...


def module(name: str) -> StoreModule:
    found: Any = importlib.import_module(f"bench.stores.{name}")
    return found  # type: ignore[no-any-return]


def for_url(url: str) -> StoreModule:
    scheme = url.split(":", 1)[0].lower()
    for name in ORDER:
        found = module(name)
        if scheme in found.SCHEMES:
            return found
    raise SystemExit(f"no bench for the scheme {scheme!r} (known: {', '.join(ORDER)})")


def split_url(url: str, ours: frozenset[str]) -> tuple[str, dict[str, Any]]:
    """The driver's URL and the ledger's options (those named in ``ours``) of ``url``."""
    request = OpenRequest.build(url)
    options = {k: v for k, v in request.options.items() if k in ours}
    return request.driver_url(ours), {"namespace": request.namespace, **options}


def versions(*distributions: str) -> dict[str, str]:
    """Installed versions of the given distributions (the missing ones left out)."""
    found: dict[str, str] = {}
    for name in distributions:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return found


def optional(name: str) -> ModuleType | None:
    """A peer library's module, or ``None`` when it is not installed (it is optional)."""
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def chunks(total: int, size: int) -> Iterator[range]:
    for start in range(0, total, size):
        yield range(start, min(total, start + size))
