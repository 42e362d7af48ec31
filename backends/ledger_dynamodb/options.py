"""``dynamodb://TABLE?region=...&endpoint_url=...&profile=...`` -> one frozen :class:`Target`.

No I/O. Credentials come only from the standard AWS chain (environment, profile, instance
role): a URL that carries any is refused, so no secret can sit in a URL, a log or a repr.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

from ledger_core.errors import InvalidLedgerURL
from ledger_core.ids import DEFAULT_NAMESPACE
from ledger_core.opening import OpenRequest
from ledger_core.protocol import Durability

DEFAULT_TIMEOUT = 10.0  # seconds for one whole call: every attempt, pause and read in it
DEFAULT_CONFIG_INTERVAL = 60.0  # seconds between DescribeTable/TTL re-checks
MAX_ATTEMPTS = 3  # attempts per request (the decisions send again; botocore does not)

# botocore's own names for where to connect; everything else in the query is ours.
DRIVER_OPTIONS = frozenset({"region", "endpoint_url", "profile"})
LEDGER_OPTIONS = frozenset({"create", "timeout", "durability", "config_interval"})
OPTIONS = DRIVER_OPTIONS | LEDGER_OPTIONS
_TABLE_NAME = re.compile(r"[A-Za-z0-9_.-]{3,255}\Z")
_AWS_HOST = re.compile(r"(^|\.)(amazonaws\.com|amazonaws\.com\.cn|api\.aws)\Z", re.IGNORECASE)


@dataclass(frozen=True)
class Settings:
    """The ledger's own settings, the same for a URL and for a host's client."""

    namespace: str = DEFAULT_NAMESPACE
    create: bool = True
    timeout: float = DEFAULT_TIMEOUT
    durability: str = Durability.MACHINE
    config_interval: float = DEFAULT_CONFIG_INTERVAL

    def __post_init__(self) -> None:
        if self.timeout <= 0:
            raise InvalidLedgerURL("option 'timeout' must be > 0 seconds")


@dataclass(frozen=True)
class Target:
    """Which table, where, and how: everything needed to build a client (no secrets)."""

    table: str
    region: str | None
    endpoint_url: str | None
    profile: str | None
    settings: Settings

    @property
    def location(self) -> str:
        where = f"dynamodb://{self.table}"
        if self.endpoint_url:
            return f"{where} at {self.endpoint_url}"
        return f"{where} in {self.region}" if self.region else where

    def client_kwargs(self) -> dict[str, Any]:
        """One attempt per request (the decisions send again), each bounded by its share."""
        from botocore.config import Config

        share = per_attempt(self.settings.timeout)
        config = Config(
            connect_timeout=share,
            read_timeout=share,
            retries={"total_max_attempts": 1, "mode": "standard"},
            max_pool_connections=64,
            tcp_keepalive=True,
        )
        return {"region_name": self.region, "endpoint_url": self.endpoint_url, "config": config}


def per_attempt(timeout: float) -> float:
    return max(timeout / MAX_ATTEMPTS, 0.05)


def is_aws_endpoint(endpoint_url: str | None) -> bool:
    """Whether requests go to AWS DynamoDB itself (no endpoint, or an AWS host name)."""
    if not endpoint_url:
        return True
    host = urlsplit(endpoint_url).hostname or ""
    return bool(_AWS_HOST.search(host))


def parse(request: OpenRequest) -> Target:
    request.check(OPTIONS)
    url = request.url
    parts = url.parts
    if "@" in parts.netloc or parts.password or parts.username:
        raise InvalidLedgerURL(
            "dynamodb:// URLs never hold credentials: use the standard AWS chain "
            "(environment, profile, instance role)"
        )
    table = unquote(parts.netloc + parts.path).strip("/")
    if not _TABLE_NAME.match(table):
        raise InvalidLedgerURL(
            f"{url}: expected dynamodb://TABLE with a table name of 3-255 characters [A-Za-z0-9_.-]"
        )
    endpoint = request.text("endpoint_url", "") or None
    if endpoint is not None:
        scheme = urlsplit(endpoint).scheme
        if scheme not in ("http", "https") or "@" in urlsplit(endpoint).netloc:
            raise InvalidLedgerURL("endpoint_url must be http(s)://host[:port] without credentials")
    return Target(
        table=table,
        region=request.text("region", "") or None,
        endpoint_url=endpoint,
        profile=request.text("profile", "") or None,
        settings=request.read(Settings),
    )
