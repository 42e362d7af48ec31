"""A server per backend for the agent-host tests: each test gets a fresh namespace URL
that spawned resumer processes open with ``open_ledger`` (real servers, not mocks)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from tests.servers import dynamodb as dynamo_servers
from tests.servers import mongodb as mongo_servers
from tests.servers import postgres as pg_servers
from tests.servers import redis as redis_servers

KINDS = ["redis", "postgres", "mongodb", "dynamodb"]


def _with_option(url: str, name: str, value: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}{name}={value}"


@contextmanager
def _base_url(kind: str) -> Iterator[str]:
    if kind == "redis":
        with redis_servers.redis_url() as url:
            yield url
    elif kind == "postgres":
        with pg_servers.postgres_server() as server:
            yield server.url
    elif kind == "mongodb":
        with mongo_servers.mongodb() as found:
            url = found.url
            for name, value in found.proof_options.items():
                url = _with_option(url, name, value)
            yield url
    else:
        with dynamo_servers.dynamodb_target("ledger_hosts") as target:
            # An emulator proves only at the process level (docs/dynamodb.md).
            local = target.server is not None
            yield _with_option(target.url, "durability", "process") if local else target.url


@contextmanager
def store(kind: str) -> Iterator[Callable[[], str]]:
    """While the block runs: a function giving a URL on a new, empty namespace."""
    with _base_url(kind) as base:

        def fresh() -> str:
            return _with_option(base, "namespace", f"hosts-{uuid.uuid4().hex[:12]}")

        yield fresh
