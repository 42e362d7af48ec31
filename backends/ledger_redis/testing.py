"""Test and operations support for the Redis schemes: the suite's fault-proxy route and a
check's scratch removal. A ledger never imports this module."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ledger_core.listing import pages
from ledger_core.opening import OpenRequest, Route, reroute_address
from ledger_core.scratch import require_scratch_prefix
from ledger_core.urls import LedgerURL

from .backend import BACKEND, CLUSTER_BACKEND, SENTINEL_BACKEND
from .commands import Command, glob_escape, namespace_of
from .ledger import Cluster, Pool, deadline_of, page
from .scans import Scan


def scratch_pattern(prefix: str, cluster: bool) -> bytes:
    """``SCAN MATCH`` for the namespaces named ``prefix...``; it over-matches:
    :func:`scratch_namespace` decides."""
    head = b"{dl-" + b"?" * 16 + b"}" if cluster else b"{}"
    return head + b"dl*:" + glob_escape(prefix.encode("utf-8")) + b"*"


def scratch_namespace(key: bytes, prefix: str, cluster: bool) -> str | None:
    """The namespace a key of this layout names, when it starts with ``prefix``; else
    ``None`` (another layout's, a look-alike tag, anything no ledger writes)."""
    name = namespace_of(key, cluster, records=True)
    if name is None:
        return None
    try:
        namespace = name.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return namespace if namespace.startswith(prefix) else None


def unlink_commands(doomed: Sequence[tuple[str, bytes]], cluster: bool) -> list[Command]:
    """One ``UNLINK`` standalone; one per namespace on a Cluster (never across slots)."""
    by_namespace: dict[str, list[bytes]] = {}
    for namespace, key in doomed:
        by_namespace.setdefault(namespace if cluster else "", []).append(key)
    return [("UNLINK", *keys) for keys in by_namespace.values()]


class ScratchScan(Scan):
    """Each page lists the namespaces it met first and keeps their keys to unlink."""

    what = "remove_scratch"

    def __init__(self, prefix: str, cluster: bool, count: int) -> None:
        self._prefix, self._cluster = prefix, cluster
        self.doomed: list[tuple[str, bytes]] = []
        super().__init__(scratch_pattern(prefix, cluster), count, None)

    def keep(self, key: bytes) -> str | None:
        namespace = scratch_namespace(key, self._prefix, self._cluster)
        if namespace is not None:
            self.doomed.append((namespace, key))
        return namespace


def _remove_page(link: Pool | Cluster, scan: ScratchScan) -> tuple[list[str], ScratchScan | None]:
    """``SCAN``, then ``UNLINK`` what it matched (safe between pages: ``SCAN`` still
    returns every key that stays); a page as ``ledger_core.listing`` takes it."""
    deadline = deadline_of(link.budget)
    names, going_on = page(link, scan, deadline)
    doomed, scan.doomed = scan.doomed, []
    for command in unlink_commands(doomed, link.cluster):
        link.call([command], scan.what, deadline)
    return names, None if going_on is None else scan


def remove_scratch(link: Pool | Cluster, prefix: str, count: int = 1000) -> int:
    scan = ScratchScan(prefix, link.cluster, count)
    return sum(1 for _ in pages(lambda at: _remove_page(link, at), scan))


class ScratchHooks:
    """``remove_scratch`` on what one scheme's ``backend`` opens."""

    def __init__(self, backend: Any) -> None:
        self._backend = backend

    def remove_scratch(self, url: LedgerURL, prefix: str) -> int:
        """Remove every key of the namespaces named ``prefix...`` (a check's own scratch
        prefix, else refused before any I/O) with the URL's options; how many namespaces."""
        checked = require_scratch_prefix(prefix)
        _, link, close = self._backend.transport(OpenRequest.build(url, create=False))
        try:
            return remove_scratch(link, checked)
        finally:
            link.close()
            close()


class RedisHooks(ScratchHooks):
    """``redis://``, ``rediss://``, ``unix://``: one address (a socket has none). Sentinel
    and Cluster have no ``reroute``: their servers hand out their own addresses."""

    def reroute(self, url: LedgerURL, route: Route) -> str | None:
        return None if url.scheme == "unix" else reroute_address(url, route, 6379)


HOOKS = RedisHooks(BACKEND)
SENTINEL_HOOKS = ScratchHooks(SENTINEL_BACKEND)
CLUSTER_HOOKS = ScratchHooks(CLUSTER_BACKEND)
