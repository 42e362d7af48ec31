"""``dynamodb://TABLE?region=...&endpoint_url=...&profile=...`` -> one frozen :class:`Target`.

No I/O. Credentials come only from the standard AWS chain (environment, profile, instance
role): a URL that carries any is refused, so no secret can sit in a URL, a log or a repr.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

from ledger_core.errors import InvalidLedgerURL
from ledger_core.ids import DEFAULT_NAMESPACE, validate_namespace
from ledger_core.protocol import Durability
from ledger_core.urls import LedgerURL, check_options, option_bool, option_float

DEFAULT_TIMEOUT = 10.0  # seconds for one whole call, botocore's retries included
DEFAULT_IDENTITY_INTERVAL = 0.25  # seconds between genesis re-reads (see docs/dynamodb.md)
DEFAULT_CONFIG_INTERVAL = 60.0  # seconds between DescribeTable/TTL re-checks
MAX_ATTEMPTS = 3  # botocore attempts per request (its retries; ours resolve by token)

# botocore's own names for where to connect; everything else in the query is ours.
DRIVER_OPTIONS = frozenset({"region", "endpoint_url", "profile"})
LEDGER_OPTIONS = frozenset(
    {"namespace", "create", "timeout", "durability", "identity_interval", "config_interval"}
)
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
    identity_interval: float = DEFAULT_IDENTITY_INTERVAL
    config_interval: float = DEFAULT_CONFIG_INTERVAL

    @classmethod
    def from_mapping(cls, options: Mapping[str, Any]) -> Settings:
        durability = str(options.get("durability", "machine")).lower()
        if durability not in ("machine", "process"):
            raise InvalidLedgerURL("option 'durability' must be 'machine' or 'process'")
        timeout = option_float(options, "timeout", DEFAULT_TIMEOUT)
        if timeout <= 0:
            raise InvalidLedgerURL("option 'timeout' must be > 0 seconds")
        return cls(
            namespace=validate_namespace(options.get("namespace", DEFAULT_NAMESPACE)),
            create=option_bool(options, "create", True),
            timeout=timeout,
            durability=Durability.MACHINE if durability == "machine" else Durability.PROCESS,
            identity_interval=option_float(options, "identity_interval", DEFAULT_IDENTITY_INTERVAL),
            config_interval=option_float(options, "config_interval", DEFAULT_CONFIG_INTERVAL),
        )


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
        """Keyword arguments for ``session.client("dynamodb", ...)``, bounded timeouts."""
        return {
            "region_name": self.region,
            "endpoint_url": self.endpoint_url,
            "config": client_config(self.settings.timeout),
        }


def client_config(timeout: float) -> Any:
    """botocore's Config: each attempt bounded so the whole call stays near ``timeout``."""
    from botocore.config import Config

    per_attempt = max(timeout / MAX_ATTEMPTS, 0.05)
    return Config(
        connect_timeout=per_attempt,
        read_timeout=per_attempt,
        retries={"total_max_attempts": MAX_ATTEMPTS, "mode": "standard"},
        max_pool_connections=64,
        tcp_keepalive=True,
    )


def is_aws_endpoint(endpoint_url: str | None) -> bool:
    """Whether requests go to AWS DynamoDB itself (no endpoint, or an AWS host name)."""
    if not endpoint_url:
        return True
    host = urlsplit(endpoint_url).hostname or ""
    return bool(_AWS_HOST.search(host))


def parse(url: LedgerURL, options: Mapping[str, Any]) -> Target:
    """The URL and keyword options as one :class:`Target`; unknown options refused."""
    check_options(url, options, OPTIONS)
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
    endpoint = options.get("endpoint_url") or None
    if endpoint is not None:
        scheme = urlsplit(str(endpoint)).scheme
        if scheme not in ("http", "https") or "@" in urlsplit(str(endpoint)).netloc:
            raise InvalidLedgerURL("endpoint_url must be http(s)://host[:port] without credentials")
    return Target(
        table=table,
        region=options.get("region") or None,
        endpoint_url=endpoint,
        profile=options.get("profile") or None,
        settings=Settings.from_mapping(options),
    )
