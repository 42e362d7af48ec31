"""What a backend is asked to open: one typed request, its options parsed once here.

``open_ledger`` merges the URL's query with the keyword options (keywords win) into one
:class:`OpenRequest`; the backend names the options it knows, and everything about
reading them lives here, so five backends cannot parse ``create=off`` five ways.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import SplitResult

from .errors import InvalidLedgerURL
from .ids import DEFAULT_NAMESPACE, validate_namespace
from .protocol import Durability
from .urls import LedgerURL

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    Options = TypeVar("Options", bound=DataclassInstance)

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}
_DURABILITY = {"machine": Durability.MACHINE, "process": Durability.PROCESS}
_LEVELS = {level: level for level in _DURABILITY.values()}


def durability_level(value: object, *, levels: bool = False) -> str:
    """The level a ``durability`` option accepts as a proof: ``machine`` or ``process``;
    with ``levels``, a level itself too (what ``describe()`` shows, SQLite's and Redis's)."""
    allowed = {**_DURABILITY, **_LEVELS} if levels else _DURABILITY
    if not isinstance(value, str) or value not in allowed:
        raise InvalidLedgerURL(
            f"option 'durability' must be one of {', '.join(sorted(allowed))}, not {value!r}"
        )
    return allowed[value]


Route = Callable[[str, int], tuple[str, int]]
"""``(host, port) -> (host, port)``: where a fault proxy stands in for an address."""

LocalFault = Callable[[], AbstractContextManager[object]]
"""Returns a context manager inside which the whole store under test suffers one fault."""

LOCAL_FAULTS = ("locked", "read-only", "full", "removed")
"""The faults the conformance suite knows for a store without a network address: its write
lock held by another, its files unwritable, no room for a write, its file gone."""


@dataclass(frozen=True)
class LocalFaults(Mapping[str, LocalFault]):
    """What a backend's optional ``local_faults(url)`` hook returns: the faults it can put
    the URL's store through now, and those it withholds with the reason, so the suite's
    report names the part of C4 it could not exercise instead of passing it in silence."""

    offered: Mapping[str, LocalFault]
    withheld: Mapping[str, str] = field(default_factory=dict)

    def __getitem__(self, name: str) -> LocalFault:
        return self.offered[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.offered)

    def __len__(self) -> int:
        return len(self.offered)


class Located:
    """Shown by where it points alone (a dataclass of it takes ``repr=False``): what a
    backend opens, whose URL for the driver may hold a password."""

    location: str

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.location}>"


@dataclass(frozen=True)
class OpenRequest:
    """One ledger to open: the parsed URL, its namespace, and every other option given
    (the URL's query and the keywords; :meth:`driver_url` keeps the driver's as written)."""

    url: LedgerURL
    namespace: str = DEFAULT_NAMESPACE
    options: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def build(cls, url: str | LedgerURL, **options: Any) -> OpenRequest:
        parsed = url if isinstance(url, LedgerURL) else LedgerURL.parse(url)
        merged: dict[str, Any] = {**parsed.query, **options}
        namespace = validate_namespace(merged.pop("namespace", DEFAULT_NAMESPACE))
        return cls(url=parsed, namespace=namespace, options=merged)

    def with_options(self, **options: Any) -> OpenRequest:
        """The same request with some options set (e.g. ``create=True`` for setup)."""
        return replace(self, options={**self.options, **options})

    def check(self, known: Collection[str]) -> None:
        """Refuse any option not in ``known`` (``namespace`` is always known)."""
        unknown = sorted(set(self.options) - {*known, "namespace"})
        if unknown:
            raise InvalidLedgerURL(
                f"unknown option(s) {', '.join(map(repr, unknown))} for {self.url.scheme}:// "
                f"(known: {', '.join(sorted({*known, 'namespace'}))})"
            )

    def has(self, name: str) -> bool:
        return name in self.options

    def text(self, name: str, default: str) -> str:
        value = self.options.get(name, default)
        if not isinstance(value, str):
            raise InvalidLedgerURL(f"option {name!r} must be text, not {type(value).__name__}")
        return value

    def choice(self, name: str, default: str, allowed: Collection[str]) -> str:
        value = self.text(name, default)
        if value not in allowed:
            raise InvalidLedgerURL(
                f"option {name!r} must be one of {', '.join(sorted(allowed))}, not {value!r}"
            )
        return value

    def flag(self, name: str, default: bool) -> bool:
        """A boolean: a bool, or URL text ``true``/``false``/``1``/``0``/``yes``/``no``."""
        value = self.options.get(name, default)
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in _TRUE | _FALSE:
            return value.lower() in _TRUE
        raise InvalidLedgerURL(f"option {name!r} must be true or false, not {value!r}")

    def seconds(self, name: str, default: float) -> float:
        """A non-negative duration in seconds (a number, or URL text)."""
        value = self.options.get(name, default)
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise InvalidLedgerURL(f"option {name!r} must be a number, not {value!r}") from None
        if number < 0 or number != number:
            raise InvalidLedgerURL(f"option {name!r} must be a non-negative number")
        return number

    def count(self, name: str, default: int, minimum: int = 0) -> int:
        """A whole number of at least ``minimum`` (an int, or URL text)."""
        value = self.options.get(name, default)
        if isinstance(value, bool):
            raise InvalidLedgerURL(f"option {name!r} must be a whole number, not {value!r}")
        try:
            number = int(value)
        except (TypeError, ValueError):
            raise InvalidLedgerURL(
                f"option {name!r} must be a whole number, not {value!r}"
            ) from None
        if number < minimum:
            raise InvalidLedgerURL(f"option {name!r} must be at least {minimum}")
        return number

    def read(self, cls: type[Options], **given: Any) -> Options:
        """The options dataclass ``cls`` from this request, each field read as its type
        says (text, seconds, a whole number, a flag) in field order, so the first bad one
        is named; ``namespace`` and ``durability`` as :meth:`durability` reads it, unless
        ``given`` (a value read another way)."""
        kinds: dict[str, Callable[[str, Any], Any]]
        kinds = {"str": self.text, "float": self.seconds, "int": self.count, "bool": self.flag}
        values: dict[str, Any] = {}
        for option in fields(cls):
            name = option.name
            if name in given:
                values[name] = given[name]
            elif name == "namespace":
                values[name] = self.namespace
            elif name == "durability":
                values[name] = self.durability()
            else:
                kind = getattr(option.type, "__name__", option.type)  # a type, or its text
                if kind not in kinds:
                    raise TypeError(
                        f"option {name!r} of {cls.__name__} is a {kind}: read() reads str, "
                        "float, int and bool; read it another way and pass it in given"
                    )
                values[name] = kinds[kind](name, option.default)
        return cls(**values)

    def driver_url(self, ours: Collection[str]) -> str:
        """The raw URL minus our options (and ``namespace``), the rest as written."""
        return self.url.without_query(*ours, "namespace")

    def create(self) -> bool:
        """``create`` (default true): may a missing store be created on open?"""
        return self.flag("create", True)

    def durability(self, *, levels: bool = False) -> str:
        """``durability`` (default ``machine``) as a level: see :func:`durability_level`."""
        return durability_level(self.text("durability", "machine"), levels=levels)


class LegacyBackend:
    """A backend written to the older form ``open(url, options)`` (``open_async``, ``setup``
    alike; ``options`` with ``namespace``), kept working; its other hooks pass through."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    @staticmethod
    def _args(request: OpenRequest) -> tuple[LedgerURL, dict[str, Any]]:
        return request.url, {**request.options, "namespace": request.namespace}

    def open(self, request: OpenRequest) -> Any:
        return self._inner.open(*self._args(request))

    async def open_async(self, request: OpenRequest) -> Any:
        return await self._inner.open_async(*self._args(request))

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)
        if name == "setup" and callable(value):
            return lambda request: value(*self._args(request))
        return value


def _legacy(method: object) -> bool:
    """Whether ``open`` wants two positional arguments (``url, options``), not one request."""
    try:
        params = inspect.signature(method).parameters.values()  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return sum(p.kind in kinds and p.default is p.empty for p in params) >= 2


def adapt_backend(backend: Any, where: str) -> Any:
    """``backend`` as the registry calls it: itself, or wrapped in :class:`LegacyBackend`
    (with a ``DeprecationWarning``) when its ``open`` takes the older ``(url, options)``."""
    if not _legacy(getattr(backend, "open", None)):
        return backend
    warnings.warn(
        f"{where}: open(url, options) is deprecated; take one request, open(request: "
        "OpenRequest) (docs/backends.md). It works through an adapter meanwhile.",
        DeprecationWarning,
        stacklevel=3,
    )
    return LegacyBackend(backend)


def reroute_address(url: LedgerURL, route: Route, default_port: int | None) -> str | None:
    """``url`` with its one ``host:port`` sent through ``route`` (a ``reroute`` hook's
    helper), or ``None`` when it has no single address (several hosts, no host or port)."""
    parts = url.parts
    shown = routed_address(parts, route, default_port)
    if shown is None:
        return None
    userinfo = parts.netloc.rpartition("@")[0]
    return parts._replace(netloc=f"{userinfo}@{shown}" if userinfo else shown).geturl()


def routed_address(parts: SplitResult, route: Route, default_port: int | None) -> str | None:
    """The one ``host:port`` of ``parts`` sent through ``route``, as a URL writes it
    (``[v6]:port``); ``None`` when there is no single one."""
    try:
        host, port = parts.hostname, parts.port
    except ValueError:
        return None
    port = port if port is not None else default_port
    if not host or port is None or "," in parts.netloc:
        return None
    new_host, new_port = route(host, port)
    return f"[{new_host}]:{new_port}" if ":" in new_host else f"{new_host}:{new_port}"


__all__ = [
    "LOCAL_FAULTS",
    "LegacyBackend",
    "LocalFault",
    "LocalFaults",
    "Located",
    "OpenRequest",
    "Route",
    "adapt_backend",
    "reroute_address",
    "routed_address",
]
