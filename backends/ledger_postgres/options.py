"""Options and URLs: what the host gives, split into libpq's part and the ledger's.

A ``postgresql://`` URL is a libpq URI; the query keys in :data:`OPTIONS` are ours and
are taken out before libpq sees the rest. Parse errors never echo a password.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from psycopg import Error as PgError
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from ledger_core.errors import InvalidLedgerURL
from ledger_core.ids import DEFAULT_NAMESPACE, validate_namespace
from ledger_core.urls import LedgerURL, check_options, option_bool, option_float

from .rules import DEFAULT_SCHEMA, DEFAULT_TABLE, DEFAULT_TIMEOUT, PgConfig, scrub

DEFAULT_POOL_MAX = 10

# Options that are ours; every other key of a URL's query string belongs to libpq.
OPTIONS = frozenset({"namespace", "schema", "table", "create", "timeout", "pool_min", "pool_max"})


def config_from(options: Mapping[str, Any]) -> PgConfig:
    return PgConfig(
        namespace=options.get("namespace", DEFAULT_NAMESPACE),
        schema=options.get("schema", DEFAULT_SCHEMA),
        table=options.get("table", DEFAULT_TABLE),
        create=option_bool(options, "create", True),
        timeout=option_float(options, "timeout", DEFAULT_TIMEOUT),
    )


def _option_int(options: Mapping[str, Any], name: str, default: int, low: int) -> int:
    value = options.get(name, default)
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise InvalidLedgerURL(f"option {name!r} must be an integer, not {value!r}") from None
    if not low <= number <= 1000:
        raise InvalidLedgerURL(f"option {name!r} must be between {low} and 1000")
    return number


@dataclass(frozen=True)
class Target:
    """What a URL opens: libpq's connection string (holds secrets) and our settings."""

    conninfo: str
    config: PgConfig
    pool_min: int
    pool_max: int
    location: str
    password: str | None

    def __repr__(self) -> str:
        return f"<Target {self.location}>"

    def pool_kwargs(self) -> dict[str, Any]:
        """The ledger's own pool, sync or async alike: autocommit sessions, set up once
        (``configure``), opened only after the server has been found fit."""
        return {
            "conninfo": self.conninfo,
            "kwargs": {"autocommit": True},
            "min_size": self.pool_min,
            "max_size": self.pool_max,
            "timeout": self.config.timeout,
            "open": False,
            "name": "decision-ledger",
        }


def _without_userinfo(raw: str) -> tuple[str, dict[str, str]]:
    """The URL without its userinfo, and the user and password it held.

    libpq splits a URI's userinfo at the first ``@``, Python (and our redaction) at
    the last: a password holding ``@`` was cut in two by libpq, and the rest taken for
    the host name, into libpq's error message. libpq gets them as separate parameters
    instead, split the one way redaction splits them.
    """
    rest = raw.partition(":")[2]
    # urlunsplit drops the "//" of an empty authority ("postgresql:///db" for a
    # socket): the authority is then empty.
    rest = rest[2:] if rest.startswith("//") else "/" + rest.lstrip("/")
    end = len(rest)
    for delimiter in "/?#":
        found = rest.find(delimiter)
        if found != -1:
            end = min(end, found)
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


def forked_pool_kwargs(host: Any, timeout: float) -> dict[str, Any]:
    """In a forked child, a pool like the host's (its conninfo, connection kwargs and
    class, its size), owned by the ledger: the host's pool, its threads and sockets
    are the parent's. Not its ``configure``: framed scripts need no session setup."""
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


def _libpq(
    conninfo: str,
    timeout: float,
    shown: str,
    secrets: list[str] | None,
    userinfo: Mapping[str, str] | None = None,
) -> tuple[str, str | None]:
    """Check a libpq URL or ``key=value`` string; default its connect timeout to ours.

    libpq's parse error may quote the text around the fault; it is shown only with the
    known secrets scrubbed, and not at all for a ``key=value`` string (whose password
    cannot be known when it does not parse). ``userinfo`` (user, password) applies
    unless the query gives its own, as in libpq.
    """
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


def target_from_url(url: LedgerURL, options: Mapping[str, Any]) -> Target:
    """Split a ``postgresql://`` URL into libpq's part and ours.

    Keyword options must be ours; query keys that are not ours go to libpq (``sslmode``,
    ``target_session_attrs``, ...), which rejects the ones it does not know.
    """
    check_options(url, {k: v for k, v in options.items() if k not in url.query}, OPTIONS)
    config = config_from(options)
    pool_max = _option_int(options, "pool_max", DEFAULT_POOL_MAX, 1)
    pool_min = min(_option_int(options, "pool_min", 1, 0), pool_max)
    raw, userinfo = _without_userinfo(url.without_query(*OPTIONS))
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


def target_from_conninfo(url_or_conninfo: str, options: Mapping[str, Any]) -> Target:
    """For :func:`setup`: a ``postgresql://`` URL (our options allowed) or a conninfo."""
    if "://" in url_or_conninfo:
        parsed = LedgerURL.parse(url_or_conninfo)
        merged = {**parsed.query, **options}
        merged["namespace"] = validate_namespace(merged.get("namespace", DEFAULT_NAMESPACE))
        return target_from_url(parsed, merged)
    check_options(LedgerURL.parse("postgresql://"), options, OPTIONS)
    config = config_from(options)
    conninfo, password = _libpq(url_or_conninfo, config.timeout, "connection string", None)
    return Target(conninfo, config, 1, 1, f"libpq conninfo table={config.qualified}", password)
