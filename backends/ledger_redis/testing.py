"""Test and operations support for the Redis schemes: the suite's fault-proxy route and a
check's scratch removal. A ledger never imports this module."""

from __future__ import annotations

from collections.abc import Sequence

from ledger_core.opening import OpenRequest, Route, reroute_address
from ledger_core.scratch import require_scratch_prefix
from ledger_core.steps import run_steps
from ledger_core.urls import LedgerURL

from .backend import Opening
from .commands import GENESIS_PREFIX, RECORD_PREFIX, Command, cluster_tag, glob_escape
from .decisions import Operation, Scan, Steps, Transport
from .ledger import SyncDriver


def scratch_pattern(prefix: str, cluster: bool) -> bytes:
    """``SCAN MATCH`` for the genesis and record keys of the namespaces named
    ``prefix...`` in this layout. It over-matches (an id holding ``:`` + the prefix, a
    look-alike tag): :func:`scratch_namespace` decides."""
    head = b"{dl-" + b"?" * 16 + b"}" if cluster else b"{}"
    return head + b"dl*:" + glob_escape(prefix.encode("utf-8")) + b"*"


def scratch_namespace(key: bytes, prefix: str, cluster: bool) -> str | None:
    """The namespace a genesis or record key of this layout names, when it starts with
    ``prefix``; ``None`` for every other key (another namespace's, another layout's, a
    tag that is not its namespace's, anything no ledger writes)."""
    body, tag = key, b""
    if cluster:
        tag, brace, rest = key.partition(b"}")
        if not brace:
            return None
        body = b"{}" + rest
    if body.startswith(GENESIS_PREFIX):
        name = body[len(GENESIS_PREFIX) :]
    elif body.startswith(RECORD_PREFIX):
        length, colon, tail = body[len(RECORD_PREFIX) :].partition(b":")
        if not colon or not length.isdigit() or tail[int(length) : int(length) + 1] != b":":
            return None
        name = tail[: int(length)]
    else:
        return None
    try:
        namespace = name.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if not namespace.startswith(prefix):
        return None
    if cluster and cluster_tag(namespace) != tag + b"}":
        return None
    return namespace


def unlink_commands(doomed: Sequence[tuple[str, bytes]], cluster: bool) -> list[Command]:
    """``UNLINK`` of a page's (namespace, key) pairs: one command standalone; one per
    namespace on a Cluster (a command may not span slots)."""
    by_namespace: dict[str, list[bytes]] = {}
    for namespace, key in doomed:
        by_namespace.setdefault(namespace if cluster else "", []).append(key)
    return [("UNLINK", *keys) for keys in by_namespace.values()]


class ScratchScan(Scan):
    """The genesis and record keys of the namespaces named ``prefix...`` on every
    master; each page lists the namespaces it met first and keeps its keys to unlink."""

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


def _remove_page(io: Transport, scan: ScratchScan) -> Steps[int | None]:
    """One page: ``SCAN``, then ``UNLINK`` what it matched, bounded like one ledger
    operation; how many namespaces it met first (``None``: every master is done).
    Deleting between pages is safe: ``SCAN`` still returns every key that stays."""
    with Operation(io, scan.what, spend=False):
        names = yield from scan.page(io)
        if names is None:
            return None
        doomed, scan.doomed = scan.doomed, []
        for command in unlink_commands(doomed, io.cluster):
            yield from io.call([command], scan.what)
        return len(names)


def remove_scratch(io: Transport, prefix: str, count: int = 1000) -> int:
    """How many namespaces named ``prefix...`` (checked by the caller) were removed."""
    driver = SyncDriver(io)
    scan = ScratchScan(prefix, io.cluster, count)
    removed = 0
    while (found := run_steps(_remove_page(io, scan), driver)) is not None:
        removed += found
    return removed


class ScratchHooks:
    """``remove_scratch`` on what one scheme opens."""

    def remove_scratch(self, url: LedgerURL, prefix: str) -> int:
        """Remove every genesis and record key of the namespaces named ``prefix...`` (a
        check's own scratch prefix, else refused before any I/O): ``SCAN MATCH`` pages,
        each ``UNLINK``ed (every master of a Cluster); how many namespaces. The URL's
        own options and timeouts; what is opened is closed after."""
        checked = require_scratch_prefix(prefix)
        _, transport, close = self._open(OpenRequest.build(url, create=False))
        try:
            return remove_scratch(transport, checked)
        finally:
            transport.close()
            close()

    def _open(self, request: OpenRequest) -> Opening:
        from .backend import BACKEND

        return BACKEND.transport(request)


class RedisHooks(ScratchHooks):
    """``redis://``, ``rediss://``, ``unix://``: one address (a socket has none)."""

    def reroute(self, url: LedgerURL, route: Route) -> str | None:
        return None if url.scheme == "unix" else reroute_address(url, route, 6379)


class SentinelHooks(ScratchHooks):
    """No ``reroute``: the Sentinels hand out the master's own address."""

    def _open(self, request: OpenRequest) -> Opening:
        from .backend import SENTINEL_BACKEND

        return SENTINEL_BACKEND.transport(request)


class ClusterHooks(ScratchHooks):
    """No ``reroute``: the nodes redirect clients to each other's own addresses."""

    def _open(self, request: OpenRequest) -> Opening:
        from .backend import CLUSTER_BACKEND

        return CLUSTER_BACKEND.transport(request)


HOOKS = RedisHooks()
SENTINEL_HOOKS = SentinelHooks()
CLUSTER_HOOKS = ClusterHooks()
