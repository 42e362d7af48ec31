"""``OpenRequest`` -> one frozen :class:`Target`: libpq's part and the ledger's, no I/O.
The query keys in :data:`OPTIONS` are ours; the rest go to libpq byte for byte."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypedDict
from urllib.parse import unquote

from psycopg import Error as PgError
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from ledger_core.errors import InvalidLedgerURL
from ledger_core.ids import DEFAULT_NAMESPACE, validate_namespace
from ledger_core.opening import Located, OpenRequest
from ledger_core.urls import LedgerURL

from .errors import scrub
from .replication import FAILOVER_MODES, KEEP

DEFAULT_SCHEMA = "public"
DEFAULT_TABLE = "decision_ledger"
DEFAULT_TIMEOUT = 5.0
DEFAULT_POOL_MAX = 10
MAX_POOL = 1000

OPTIONS = frozenset(
    {"namespace", "schema", "table", "create", "timeout", "pool_min", "pool_max", "failover"}
)

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")


def check_identifier(kind: str, name: object) -> str:
    """A plain identifier (still always quoted); ``pg_`` schemas (``pg_temp``: a table
    that forgets) are PostgreSQL's own."""
    if not isinstance(name, str) or not _IDENTIFIER.fullmatch(name):
        raise InvalidLedgerURL(
            f"{kind} name {name!r} is not a plain identifier "
            "(ASCII letters, digits and _, not starting with a digit, at most 63 bytes)"
        )
    if kind == "schema" and name.startswith("pg_"):
        raise InvalidLedgerURL(f"schema name {name!r}: the pg_ prefix is PostgreSQL's own")
    return name


@dataclass(frozen=True)
class PgConfig:
    namespace: str = DEFAULT_NAMESPACE
    schema: str = DEFAULT_SCHEMA
    table: str = DEFAULT_TABLE
    create: bool = True
    timeout: float = DEFAULT_TIMEOUT
    failover: str = KEEP  # replication.FAILOVER_MODES: what a promotion does to store_id

    def __post_init__(self) -> None:
        validate_namespace(self.namespace)
        if self.failover not in FAILOVER_MODES:
            raise InvalidLedgerURL(f"option 'failover' must be one of {', '.join(FAILOVER_MODES)}")
        check_identifier("schema", self.schema)
        check_identifier("table", self.table)
        if not 0 < self.timeout <= 3600:
            raise InvalidLedgerURL("option 'timeout' must be more than 0 and at most 3600 s")

    @property
    def namespace_bytes(self) -> bytes:
        return self.namespace.encode("utf-8")

    @property
    def qualified(self) -> str:
        """``schema.table`` for messages (plain identifiers: nothing to hide or escape)."""
        return f"{self.schema}.{self.table}"


@dataclass(frozen=True, repr=False)
class Target(Located):
    """``conninfo`` holds secrets."""

    conninfo: str
    config: PgConfig
    pool_min: int
    pool_max: int
    location: str
    password: str | None

    def pool_kwargs(self) -> dict[str, Any]:
        return {
            "conninfo": self.conninfo,
            "kwargs": {"autocommit": True},
            "min_size": self.pool_min,
            "max_size": self.pool_max,
            "timeout": self.config.timeout,
            "open": False,
            "name": "decision-ledger",
        }


def forked_pool_kwargs(host: Any, timeout: float) -> dict[str, Any]:
    """A forked child's own pool, like the host's but without its ``configure``."""
    return {
        "conninfo": host.conninfo,
        "kwargs": host.kwargs,
        "connection_class": host.connection_class,
        "min_size": 0,
        "max_size": host.max_size,
        "timeout": timeout,
        "open": False,
        "name": "decision-ledger (forked child)",
    }


def _without_userinfo(raw: str) -> tuple[str, dict[str, str]]:
    """The URL without its userinfo, and the user and password, split at the last
    ``@`` as redaction splits them (libpq splits at the first)."""
    rest = raw.partition(":")[2]
    # urlunsplit drops the "//" of an empty authority ("postgresql:///db").
    rest = rest[2:] if rest.startswith("//") else "/" + rest.lstrip("/")
    end = min((i for i in map(rest.find, "/?#") if i >= 0), default=len(rest))
    authority, tail = rest[:end], rest[end:]
    userinfo, at, hostinfo = authority.rpartition("@")
    params: dict[str, str] = {}
    if at:
        user, colon, password = userinfo.partition(":")
        if user:
            params["user"] = unquote(user)
        if colon:
            params["password"] = unquote(password)
    return f"postgresql://{hostinfo}{tail}", params


def _libpq(
    conninfo: str,
    timeout: float,
    shown: str,
    secrets: list[str] | None,
    userinfo: Mapping[str, str] | None = None,
) -> tuple[str, str | None]:
    """Check a libpq URL or ``key=value`` string; default its connect timeout to ours.
    libpq's parse error is shown only scrubbed, never for a ``key=value`` string."""
    try:
        params = conninfo_to_dict(conninfo)
        for key, value in (userinfo or {}).items():
            params.setdefault(key, value)
    except (PgError, ValueError, TypeError) as exc:
        why = ""
        if secrets is not None:
            detail = str(exc).strip()
            for secret in secrets:
                detail = scrub(detail, secret)
            why = f" ({detail})"
        raise InvalidLedgerURL(f"{shown}: libpq cannot parse it{why}") from None
    password = params.get("password")
    params.setdefault("connect_timeout", max(2, round(timeout)))
    return make_conninfo("", **params), None if password is None else str(password)


def _pool_size(request: OpenRequest, name: str, default: int, minimum: int) -> int:
    number = request.count(name, default, minimum)
    if number > MAX_POOL:
        raise InvalidLedgerURL(f"option {name!r} must be between {minimum} and {MAX_POOL}")
    return number


def config_from(request: OpenRequest) -> PgConfig:
    return request.read(PgConfig, failover=request.choice("failover", KEEP, FAILOVER_MODES))


def parse(request: OpenRequest) -> Target:
    # Keyword options must be ours; the URL's own query keys that are not go to libpq.
    request.check({*OPTIONS, *request.url.query})
    config = config_from(request)
    pool_max = _pool_size(request, "pool_max", DEFAULT_POOL_MAX, 1)
    pool_min = min(_pool_size(request, "pool_min", 1, 0), pool_max)
    url = request.url
    raw, userinfo = _without_userinfo(request.driver_url(OPTIONS))
    secrets = [s for s in (url.parts.password, url.query.get("password")) if s]
    conninfo, password = _libpq(raw, config.timeout, str(url), secrets, userinfo)
    return Target(
        conninfo=conninfo,
        config=config,
        pool_min=pool_min,
        pool_max=pool_max,
        location=f"{url} table={config.qualified}",
        password=password,
    )


def parse_conninfo(url_or_conninfo: str, options: Mapping[str, Any]) -> Target:
    """For :func:`~ledger_postgres.setup`: a URL or a libpq ``key=value`` string."""
    if "://" in url_or_conninfo:
        return parse(OpenRequest.build(url_or_conninfo, **options))
    request = OpenRequest.build(LedgerURL.parse("postgresql://"), **options)
    request.check(OPTIONS)
    config = config_from(request)
    conninfo, password = _libpq(url_or_conninfo, config.timeout, "connection string", None)
    return Target(conninfo, config, 1, 1, f"libpq conninfo table={config.qualified}", password)


class PoolOptions(TypedDict, total=False):
    """``from_pool``'s keyword options (a ledger on a pool the host owns)."""

    namespace: str
    schema: str
    table: str
    create: bool
    timeout: float
    failover: str
