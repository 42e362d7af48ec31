"""``mongodb://`` and ``mongodb+srv://`` URLs -> one frozen :class:`Target` (no I/O).

The URL is passed to PyMongo as MongoDB writes it (database in the path, the driver's own
options in the query); only our options (:data:`OPTIONS`) are taken out, without
re-encoding the rest.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from ledger_core.errors import InvalidLedgerURL
from ledger_core.ids import DEFAULT_NAMESPACE, validate_namespace
from ledger_core.protocol import Durability
from ledger_core.urls import LedgerURL, check_options, option_bool, option_float

DEFAULT_DATABASE = "decision_ledger"
DEFAULT_COLLECTION = "decision_ledger"
DEFAULT_TIMEOUT = 5.0
DEFAULT_RECHECK = 10.0

# Ours; every other query key belongs to PyMongo and is passed through untouched.
OPTIONS = frozenset({"namespace", "collection", "create", "timeout", "recheck", "durability"})
# A client the host gives keeps its own timeouts and connection settings.
CLIENT_OPTIONS = frozenset({"namespace", "collection", "create", "recheck", "durability"})
DURABILITY = {"machine": Durability.MACHINE, "process": Durability.PROCESS}
_FORBIDDEN_NAME = frozenset('/\\. "$\x00')


def _durability(value: object) -> str:
    if value not in DURABILITY:
        raise InvalidLedgerURL(
            f"option 'durability' must be one of {', '.join(DURABILITY)}, not {value!r}"
        )
    return DURABILITY[str(value)]


@dataclass(frozen=True)
class Settings:
    """The ledger's own settings, the same for a URL and for a host's client."""

    namespace: str = DEFAULT_NAMESPACE
    collection: str = DEFAULT_COLLECTION
    create: bool = True
    timeout: float = DEFAULT_TIMEOUT
    recheck: float = DEFAULT_RECHECK
    # The weakest durability the user accepts for a proof (docs/contract.md, "Durability").
    durability: str = Durability.MACHINE

    @classmethod
    def from_mapping(cls, options: Mapping[str, Any], *, timeout: bool = True) -> Settings:
        collection = options.get("collection", DEFAULT_COLLECTION)
        if (
            not isinstance(collection, str)
            or not collection
            or collection.startswith("system.")
            or "$" in collection
            or "\x00" in collection
        ):
            raise InvalidLedgerURL(f"option 'collection' is not a usable name: {collection!r}")
        number = option_float(options, "timeout", DEFAULT_TIMEOUT) if timeout else DEFAULT_TIMEOUT
        if number <= 0:
            raise InvalidLedgerURL("option 'timeout' must be greater than 0 (seconds)")
        return cls(
            namespace=validate_namespace(options.get("namespace", DEFAULT_NAMESPACE)),
            collection=collection,
            create=option_bool(options, "create", True),
            timeout=number,
            recheck=option_float(options, "recheck", DEFAULT_RECHECK),
            durability=_durability(options.get("durability", "machine")),
        )


@dataclass(frozen=True)
class Target:
    """What a URL opens: the driver's URL (holds secrets), the database and our settings."""

    driver_url: str
    database: str
    settings: Settings
    location: str
    driver_keys: frozenset[str]

    def __repr__(self) -> str:
        return f"<Target {self.location}>"

    def client_kwargs(self) -> dict[str, Any]:
        """Finite timeouts that bound the whole call (CSOT ``timeoutMS``: server selection,
        reconnects and the reply), unless the URL sets its own; never driver retries, since
        the ledger settles a lost reply itself (C5)."""
        ms = int(self.settings.timeout * 1000)
        kwargs: dict[str, Any] = {}
        for key, value in (
            ("timeoutms", ("timeoutMS", ms)),
            ("serverselectiontimeoutms", ("serverSelectionTimeoutMS", ms)),
            ("connecttimeoutms", ("connectTimeoutMS", ms)),
            ("retrywrites", ("retryWrites", False)),
            ("retryreads", ("retryReads", False)),
            ("appname", ("appname", "decision-ledger")),
        ):
            if key not in self.driver_keys:
                kwargs[value[0]] = value[1]
        return kwargs


def _database(url: LedgerURL) -> str:
    name = unquote(url.parts.path.lstrip("/"))
    if not name:
        return DEFAULT_DATABASE
    if any(ch in _FORBIDDEN_NAME for ch in name) or len(name.encode()) > 63:
        raise InvalidLedgerURL(f"{url} names an invalid MongoDB database {name!r}")
    return name


def parse(url: LedgerURL, options: Mapping[str, Any]) -> Target:
    """Split ``url`` + ``options`` into the driver's URL and our :class:`Settings`."""
    if url.scheme not in ("mongodb", "mongodb+srv"):
        raise InvalidLedgerURL(f"expected a mongodb:// or mongodb+srv:// URL, not {url}")
    driver_keys = frozenset(k.lower() for k in url.query if k not in OPTIONS)
    check_options(url, {k: v for k, v in options.items() if k not in url.query}, OPTIONS)
    settings = Settings.from_mapping(options)
    database = _database(url)
    location = url.without_query(*url.query)  # no query at all: it may carry secrets
    shown = LedgerURL.parse(location).redacted if location else str(url)
    return Target(
        driver_url=url.without_query(*OPTIONS),
        database=database,
        settings=settings,
        location=f"{shown}?collection={settings.collection}",
        driver_keys=driver_keys,
    )


def check_client_options(options: Mapping[str, Any]) -> Settings:
    """Our options for a ledger over a host's client (which keeps its own timeouts)."""
    unknown = sorted(set(options) - CLIENT_OPTIONS)
    if unknown:
        raise InvalidLedgerURL(
            f"unknown option(s) {', '.join(map(repr, unknown))} for a MongoDB ledger on a "
            f"client (known: {', '.join(sorted(CLIENT_OPTIONS))})"
        )
    return Settings.from_mapping(options, timeout=False)
