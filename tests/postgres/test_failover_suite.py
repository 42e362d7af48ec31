"""The suite's failover clause and a short failover torture on PostgreSQL standbys.

A primary and a streaming standby (tests/servers/postgres.py); the ledgers' URL names
both hosts with ``target_session_attrs=read-write``, so a ledger reaches whichever is
the primary. The failover hook kills -9 the primary and promotes the standby.

* synchronous standby (``synchronous_standby_names`` naming it): every acknowledged
  spend is on the standby, the store_id is kept, and C6 after failover passes;
* asynchronous standby with ``failover=new-store-id``: the timeline is in the store_id,
  so the promotion gives another one (hosts ask again) and the old instances fail
  closed: C6 after failover passes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from ledger_conformance.clauses.c6_failover import C6Failover
from ledger_core.registry import open_async_ledger, open_ledger
from tests.servers.postgres import PostgresServer
from tests.torture.conftest import one_failover

from .test_failover import _fail_over, _pair

TIMEOUT = 2.0  # seconds per call: a call to the dead primary ends quickly


class Topology:
    """The pair, its two-host URL and the options every ledger is opened with."""

    def __init__(self, primary: PostgresServer, standby: PostgresServer, url: str, **options: Any):
        self.primary, self.standby, self.url, self.options = primary, standby, url, options

    def fail_over(self) -> None:
        _fail_over(self.primary, self.standby)


def _topology(sync: bool, **options: Any) -> Iterator[Topology]:
    with _pair(sync=sync) as (primary, standby, _relay, url):
        yield Topology(primary, standby, url, **options)


@pytest.fixture
def synchronous() -> Iterator[Topology]:
    yield from _topology(sync=True)


@pytest.fixture
def renaming() -> Iterator[Topology]:
    yield from _topology(sync=False, failover="new-store-id")


def _factory(topology: Topology) -> Callable[[Any], Any]:
    def factory(ctx: Any) -> Any:
        opener = open_async_ledger if ctx.flavor == "async" else open_ledger
        return opener(topology.url, namespace=ctx.store, timeout=TIMEOUT, **topology.options)

    return factory


class TestSynchronousStandby(C6Failover):
    """C6 after failover alone (the rest of the suite runs in test_conformance_postgres)."""

    @pytest.fixture
    def ledger_factory(self, synchronous: Topology) -> Any:
        return _factory(synchronous)

    @pytest.fixture
    def ledger_failover(self, synchronous: Topology) -> Callable[[], object]:
        return synchronous.fail_over


class TestNewStoreIdOverAnAsyncStandby(C6Failover):
    @pytest.fixture
    def ledger_factory(self, renaming: Topology) -> Any:
        return _factory(renaming)

    @pytest.fixture
    def ledger_failover(self, renaming: Topology) -> Callable[[], object]:
        return renaming.fail_over


@pytest.mark.parametrize("which", ["synchronous", "renaming"])
def test_a_short_torture_with_a_failover(which: str, request: pytest.FixtureRequest) -> None:
    """One failover mid-run: no double win, no lost spend. The synchronous standby keeps
    the store_id (the final read is judged); ``new-store-id`` changes it."""
    topology: Topology = request.getfixturevalue(which)
    result, text = one_failover(
        f"{topology.url}&" + "&".join(f"{k}={v}" for k, v in topology.options.items()),
        topology.fail_over,
    )
    assert (result.totals.renamed is None) == (which == "synchronous"), text
