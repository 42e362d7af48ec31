"""``--ledger-url``: the suite builds ledgers itself, one namespace per store label.

The URL's ``host:port`` is rewritten through ``ctx.route`` so the fault proxy can sit in
the path. Schemes without a single network address (files, memory, sockets, clusters
whose nodes redirect elsewhere) are never routed, and the fault clauses then say
"not exercised".
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import ledger_core
from ledger_core.errors import InvalidLedgerURL
from ledger_core.urls import LedgerURL

from .context import LedgerContext

# Default ports of the schemes we know; a URL without a port on another scheme is not routed.
DEFAULT_PORTS = {
    "redis": 6379,
    "rediss": 6379,
    "postgresql": 5432,
    "postgres": 5432,
    "mongodb": 27017,
}
# mongodb+srv names a DNS record of many hosts: no single address to stand in front of.
UNROUTABLE = frozenset({"memory", "sqlite", "unix", "redis+cluster", "mongodb+srv"})
MAX_NAMESPACE_BYTES = 256
# Every namespace a URL run writes starts with this (then the run id): one clearly named
# scratch area in the user's store, which the report names.
SCRATCH_PREFIX = "ledger-conformance"


def routable(url: str) -> bool:
    """Whether the URL names one host:port that a proxy can stand in front of."""
    try:
        parsed = LedgerURL.parse(url)
    except InvalidLedgerURL:
        return False
    if parsed.scheme in UNROUTABLE:
        return False
    try:
        host, port = parsed.parts.hostname, parsed.parts.port
    except ValueError:
        return False
    return (
        bool(host)
        and "," not in parsed.parts.netloc
        and (port is not None or parsed.scheme in DEFAULT_PORTS)
    )


def rewrite(url: str, ctx: LedgerContext) -> str:
    """``url`` with its host:port replaced by ``ctx.route(host, port)`` when routable."""
    if not routable(url):
        return url
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or DEFAULT_PORTS[parts.scheme.lower()]
    new_host, new_port = ctx.route(host, port)
    userinfo = parts.netloc.rpartition("@")[0]
    shown = f"[{new_host}]" if ":" in new_host else new_host
    netloc = f"{userinfo}@{shown}:{new_port}" if userinfo else f"{shown}:{new_port}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def namespace_for(run_id: str, label: str) -> str:
    """One namespace per (run, label): unique per run, and always a valid namespace."""
    namespace = f"{run_id}-{label}"
    if len(namespace.encode("utf-8")) <= MAX_NAMESPACE_BYTES:
        return namespace
    digest = hashlib.sha256(label.encode("utf-8", "surrogatepass")).hexdigest()
    return f"{run_id}-h-{digest}"


@dataclass(frozen=True)
class URLFactory:
    """A factory (in the contract's sense) over a ledger URL."""

    url: str
    run_id: str

    def __call__(self, ctx: LedgerContext) -> Any:
        url = rewrite(self.url, ctx)
        namespace = namespace_for(self.run_id, ctx.store)
        if ctx.flavor == "async":
            return ledger_core.open_async_ledger(url, namespace=namespace)
        return ledger_core.open_ledger(url, namespace=namespace)

    def __repr__(self) -> str:
        return f"URLFactory({ledger_core.redact_url(self.url)!r})"

    @property
    def routable(self) -> bool:
        return routable(self.url)
