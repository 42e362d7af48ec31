"""``mongodb://`` and ``mongodb+srv://`` URLs -> one frozen :class:`Target` (no I/O). The
URL goes to PyMongo as written, only our options (:data:`OPTIONS`) taken out."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from ledger_core.errors import InvalidLedgerURL
from ledger_core.ids import DEFAULT_NAMESPACE
from ledger_core.opening import Located, OpenRequest
from ledger_core.protocol import Durability
from ledger_core.urls import LedgerURL

DEFAULT_DATABASE = "decision_ledger"
DEFAULT_COLLECTION = "decision_ledger"
DEFAULT_TIMEOUT = 5.0
DEFAULT_RECHECK = 10.0

# Ours; every other query key belongs to PyMongo and is passed through untouched.
OPTIONS = frozenset({"collection", "create", "timeout", "recheck", "durability"})
# A client the host gives keeps its own timeouts and connection settings.
CLIENT_OPTIONS = OPTIONS - {"timeout"}
_FORBIDDEN_NAME = frozenset('/\\. "$\x00')
_CLIENT_URL = LedgerURL.parse("mongodb://client")


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

    def __post_init__(self) -> None:
        collection = self.collection
        if not collection or collection.startswith("system.") or {"$", "\x00"} & set(collection):
            raise InvalidLedgerURL(f"option 'collection' is not a usable name: {collection!r}")
        if self.timeout <= 0:
            raise InvalidLedgerURL("option 'timeout' must be greater than 0 (seconds)")


@dataclass(frozen=True, repr=False)
class Target(Located):
    """What a URL opens: the driver's URL (holds secrets), the database and our settings."""

    driver_url: str
    database: str
    settings: Settings
    location: str
    driver_keys: frozenset[str]

    def client_kwargs(self) -> dict[str, Any]:
        """Finite timeouts that bound the whole call (CSOT ``timeoutMS``: server selection,
        reconnects and the reply), unless the URL sets its own; never driver retries, since
        the ledger settles a lost reply itself (C5)."""
        ms = int(self.settings.timeout * 1000)
        ours: dict[str, Any] = {"timeoutMS": ms, "serverSelectionTimeoutMS": ms}
        ours |= {"connectTimeoutMS": ms, "retryWrites": False, "retryReads": False}
        ours["appname"] = "decision-ledger"
        return {key: value for key, value in ours.items() if key.lower() not in self.driver_keys}


def _database(url: LedgerURL) -> str:
    name = unquote(url.parts.path.lstrip("/"))
    if not name:
        return DEFAULT_DATABASE
    if any(ch in _FORBIDDEN_NAME for ch in name) or len(name.encode()) > 63:
        raise InvalidLedgerURL(f"{url} names an invalid MongoDB database {name!r}")
    return name


def parse(request: OpenRequest) -> Target:
    """The driver's URL (query keys not ours are PyMongo's) and our :class:`Settings`."""
    url = request.url
    if url.scheme not in ("mongodb", "mongodb+srv"):
        raise InvalidLedgerURL(f"expected a mongodb:// or mongodb+srv:// URL, not {url}")
    request.check(OPTIONS | set(url.query))
    settings = request.read(Settings)
    database = _database(url)
    location = url.without_query(*url.query)  # no query at all: it may carry secrets
    shown = LedgerURL.parse(location).redacted if location else str(url)
    return Target(
        driver_url=request.driver_url(OPTIONS),
        database=database,
        settings=settings,
        location=f"{shown}?collection={settings.collection}",
        driver_keys=frozenset(k.lower() for k in url.query if k not in {*OPTIONS, "namespace"}),
    )


def client_settings(options: Mapping[str, Any]) -> Settings:
    """Our options for a ledger over a host's client (which keeps its own timeouts)."""
    request = OpenRequest.build(_CLIENT_URL, **options)
    request.check(CLIENT_OPTIONS)
    return request.read(Settings)
