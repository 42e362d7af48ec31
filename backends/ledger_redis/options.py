"""Redis URL requests -> one frozen :class:`Target` (no I/O). Our options are taken out
of the URL; the driver options allowed in it stay there, as written, for redis-py."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from ledger_core.errors import InvalidLedgerURL
from ledger_core.opening import Located, OpenRequest
from ledger_core.protocol import Durability
from ledger_core.urls import LedgerURL

from .errors import location, user

# Driver options allowed in the URL query (redis-py parses them from the URL).
DRIVER_URL_OPTIONS = frozenset(
    {"db", "client_name", "max_connections", "ssl_cert_reqs", "ssl_ca_certs", "ssl_certfile"}
    | {"ssl_keyfile", "ssl_check_hostname", "sentinels"}
)
_CLIENT_URL = LedgerURL.parse("redis://client")


@dataclass(frozen=True)
class RedisOptions:
    timeout: float = 5.0
    connect_timeout: float = 5.0
    wait_replicas: int = 0
    wait_aof: bool = False
    wait_timeout: float = 1.0
    trust_config: bool = False
    require_aof: bool = False
    durability: str = Durability.MACHINE
    create: bool = True
    recheck_interval: float = 5.0
    failover_may_lose_spends: bool = False

    def __post_init__(self) -> None:
        for name in ("timeout", "connect_timeout", "wait_timeout"):
            value = getattr(self, name)
            if not value > 0:
                raise InvalidLedgerURL(f"option {name!r} must be a positive number of seconds")
        if self.wait_replicas < 0:
            raise InvalidLedgerURL("option 'wait_replicas' must be 0 or more")
        if self.waits and self.wait_timeout >= self.timeout:
            raise InvalidLedgerURL(
                "option 'wait_timeout' must be shorter than 'timeout', or the socket "
                "would give up before the server answers"
            )

    @property
    def waits(self) -> bool:
        return self.wait_replicas > 0 or self.wait_aof

    @classmethod
    def from_request(cls, request: OpenRequest) -> RedisOptions:
        failover = request.choice("failover_may_lose_spends", "no", ("no", "accept"))
        levels = request.durability(levels=True)  # describe()'s values too
        return request.read(cls, durability=levels, failover_may_lose_spends=failover == "accept")

    @classmethod
    def for_client(cls, options: Mapping[str, Any]) -> RedisOptions:
        unknown = sorted(set(options) - CLIENT_OPTIONS)
        if unknown:
            raise InvalidLedgerURL(
                f"unknown option(s) {', '.join(map(repr, unknown))} for a Redis ledger on a "
                f"client (known: {', '.join(sorted(CLIENT_OPTIONS))})"
            )
        return cls.from_request(OpenRequest(_CLIENT_URL, options=dict(options)))


LEDGER_OPTIONS = frozenset({"namespace", *(f.name for f in fields(RedisOptions))})
# The Sentinels' own credentials (redis-py's ``sentinel_kwargs``), apart from the master's
# in the URL's userinfo; held by the Target only, never by RedisOptions (which has a repr).
SENTINEL_OPTIONS = frozenset({"sentinel_username", "sentinel_password"})
CLIENT_OPTIONS = LEDGER_OPTIONS - {"timeout", "connect_timeout"}


@dataclass(frozen=True, repr=False)
class Target(Located):
    """``driver_url`` may hold a password: never shown."""

    driver_url: str
    location: str
    options: RedisOptions
    namespace: str
    cluster: bool
    # redis+sentinel://: the master's name and every Sentinel's (host, port)
    service: str = ""
    sentinels: tuple[tuple[str, int], ...] = ()
    sentinel_auth: dict[str, str] = field(default_factory=dict, repr=False, compare=False)


def parse(request: OpenRequest) -> Target:
    url = request.url
    request.check(LEDGER_OPTIONS | DRIVER_URL_OPTIONS | SENTINEL_OPTIONS)
    for name in DRIVER_URL_OPTIONS & set(request.options):
        if url.query.get(name) != request.options[name]:
            raise InvalidLedgerURL(f"driver option {name!r} goes in the URL query string")
    if url.scheme == "redis+sentinel":
        return _sentinel_target(request)
    misplaced = sorted(SENTINEL_OPTIONS & set(request.options))
    if misplaced:
        raise InvalidLedgerURL(f"option {misplaced[0]!r} is for redis+sentinel:// URLs only")
    _check_driver_parts(url)
    cluster = url.scheme == "redis+cluster"
    raw = request.driver_url(LEDGER_OPTIONS)
    scheme, _, rest = raw.partition(":")
    # ``unix:///path`` comes back as ``unix:/path``, which redis-py refuses; a Cluster
    # URL is a ``redis://`` URL of any node to redis-py.
    rest = rest if rest.startswith("//") else "//" + rest
    return Target(
        driver_url=("redis" if cluster else scheme) + ":" + rest,
        location=location(url),
        options=RedisOptions.from_request(request),
        namespace=request.namespace,
        cluster=cluster,
    )


def _check_driver_parts(url: LedgerURL) -> None:
    """Refuse what redis-py would silently ignore or misread (a wrong database is
    another store)."""
    path = url.parts.path
    if "sentinels" in url.query:
        raise InvalidLedgerURL("option 'sentinels' is for redis+sentinel:// URLs only")
    if url.scheme == "unix" and "@" in path:
        # redis-py quotes the socket path in its errors: never let a piece of a
        # password (a raw "/" in it) become one.
        raise InvalidLedgerURL(
            "the socket path of a unix:// URL contains '@': percent-encode a password "
            "that contains '/', '#', '?' or '@'"
        )
    if url.scheme != "unix" and path not in ("", "/") and not re.fullmatch(r"/\d{1,5}", path):
        raise InvalidLedgerURL(f"the path of {location(url)} must be a database number (/0)")
    for name in ("db", "max_connections"):
        value = url.query.get(name)
        if value is not None and not re.fullmatch(r"\d{1,6}", value):
            raise InvalidLedgerURL(f"option {name!r} must be a whole number, not {value!r}")
    if re.fullmatch(r"0+", url.query.get("max_connections", "1")):
        raise InvalidLedgerURL("option 'max_connections' must be at least 1")


SENTINEL_PORT = 26379


def _addresses(text: str) -> list[tuple[str, int]]:
    if "@" in text:
        # Refused whole, before any address is read (and echoed): what stands before the
        # "@" is a password, and may hold a "," that would split it into an "address".
        raise InvalidLedgerURL(
            "a Sentinel address in 'sentinels' takes no user or password (host:port only): "
            "give the Sentinels' own with the sentinel_username / sentinel_password options"
        )
    return [_address(x) for x in text.split(",") if x.strip()]


def _address(text: str) -> tuple[str, int]:
    host, colon, port = text.strip().rpartition(":")
    if not colon:
        host, port = port, str(SENTINEL_PORT)
    if not host or not re.fullmatch(r"\d{1,5}", port):
        raise InvalidLedgerURL(f"a Sentinel address must be host:port, not {text.strip()!r}")
    return host.strip("[]"), int(port)


def _sentinel_target(request: OpenRequest) -> Target:
    """``redis+sentinel://[user:password@]host:port/<master name>[/db]?sentinels=h:p,...``;
    the userinfo is the master's credentials, ``sentinel_username`` / ``sentinel_password``
    the Sentinels' own."""
    url = request.url
    p = url.parts
    pieces = [x for x in p.path.split("/") if x]
    if not 1 <= len(pieces) <= 2 or (len(pieces) == 2 and not pieces[1].isdigit()):
        raise InvalidLedgerURL(
            "a redis+sentinel:// URL names the master after the address: "
            "redis+sentinel://host:26379/<master name>[/db]"
        )
    if p.hostname is None:
        raise InvalidLedgerURL("a redis+sentinel:// URL needs a Sentinel's host:port")
    sentinels = [(p.hostname, p.port or SENTINEL_PORT)]
    more = url.query.get("sentinels", "")
    sentinels += _addresses(more)
    netloc = p.netloc.rpartition("@")
    userinfo = netloc[0] + "@" if netloc[1] else ""
    db = pieces[1] if len(pieces) == 2 else "0"
    raw = request.driver_url(LEDGER_OPTIONS | SENTINEL_OPTIONS | {"sentinels"})
    query = raw.partition("?")[2]
    driver = f"redis://{userinfo}sentinel/{db}" + (f"?{query}" if query else "")
    shown = ",".join(f"{h}:{port}" for h, port in sentinels)
    return Target(
        driver_url=driver,
        location=f"redis+sentinel://{user(p)}{shown}/{pieces[0]}/{db}",
        options=RedisOptions.from_request(request),
        namespace=request.namespace,
        cluster=False,
        service=pieces[0],
        sentinels=tuple(sentinels),
        sentinel_auth=_sentinel_auth(request),
    )


def _sentinel_auth(request: OpenRequest) -> dict[str, str]:
    """redis-py's ``username`` / ``password`` for the Sentinels (empty: they need none)."""
    auth = {}
    for name in sorted(SENTINEL_OPTIONS):
        value = request.text(name, "")
        if value:
            auth[name.removeprefix("sentinel_")] = value
    if "username" in auth and "password" not in auth:
        raise InvalidLedgerURL("option 'sentinel_username' needs 'sentinel_password' too")
    return auth
