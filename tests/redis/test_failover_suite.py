"""The suite's failover clause and a short failover torture on Redis under Sentinel.

A primary, a replica and three Sentinels (tests/servers/redis.py); the ledgers reach the
master through the ``redis+sentinel://`` URL. The failover hook kills -9 the primary
and waits until every Sentinel names the promoted replica. A ledger binds its store_id
to ``master_replid``, so the promotion gives another store_id and the instances opened
before fail closed: C6 after failover passes. With ``failover_may_lose_spends=accept``
over a partitioned replica the store_id is kept and the spends are lost: the clause
fails (through ``decision-ledger check --failover CMD``).
"""

from __future__ import annotations

import re
import shlex
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from ledger_conformance.clauses.c6_failover import C6Failover
from ledger_conformance.runner import run_check
from ledger_core import open_async_ledger, open_ledger
from ledger_core.registry import available_schemes, register_backend
from ledger_redis import SENTINEL_BACKEND
from tests.servers import redis as servers
from tests.servers.common import serve_or_skip
from tests.torture.conftest import one_failover

if "redis+sentinel" not in available_schemes():  # an install older than this checkout
    register_backend("redis+sentinel", SENTINEL_BACKEND)

TIMEOUT = "2"  # seconds per call: a call to the dead master ends quickly


def _watched() -> Iterator[servers.Replicated]:
    yield from serve_or_skip(lambda: servers.local_replicated(sentinels=3))


@pytest.fixture
def watched() -> Iterator[servers.Replicated]:
    yield from _watched()


class TestSentinelFailover(C6Failover):
    """C6 after failover, and nothing else (the rest of the suite runs on the other
    Redis configurations): one topology, one failover."""

    @pytest.fixture
    def ledger_factory(self, watched: servers.Replicated) -> Any:
        url = watched.sentinel_url

        def factory(ctx: Any) -> Any:
            opener = open_async_ledger if ctx.flavor == "async" else open_ledger
            return opener(url, namespace=ctx.store, timeout=TIMEOUT)

        return factory

    @pytest.fixture
    def ledger_failover(self, watched: servers.Replicated) -> Callable[[], object]:
        return watched.promote


def _kill_and_wait(pair: servers.Replicated) -> str:
    """A shell command: kill -9 the primary, then wait until every Sentinel names the
    replica (bounded by the check's 120 s hook limit and the loop's own count)."""
    assert pair.primary.proc is not None
    ports = [s.port for s in pair.sentinels]
    code = (
        "import time, redis\n"
        f"for _ in range(600):\n"
        f"    names = [redis.Redis(port=p, socket_timeout=2, decode_responses=True)"
        f".execute_command('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', {servers.MASTER_NAME!r})"
        f" for p in {ports!r}]\n"
        f"    if all(str(n[1]) == '{pair.replica.port}' for n in names): break\n"
        "    time.sleep(0.05)\n"
        "else: raise SystemExit('the Sentinels never named the replica')\n"
    )
    python = f"{shlex.quote(sys.executable)} -c {shlex.quote(code)}"
    return f"kill -9 {pair.primary.proc.pid} && {python}"


class _Lossy:
    """A factory for ``decision-ledger check --factory``: every store label is the one
    namespace the test opened before it partitioned the replica (so its genesis is on
    both), with ``failover_may_lose_spends=accept``: the store_id outlives the failover."""

    url = ""

    def __call__(self, ctx: Any) -> Any:
        opener = open_async_ledger if ctx.flavor == "async" else open_ledger
        return opener(self.url, namespace=LOSSY, timeout=TIMEOUT, **ACCEPT)


LOSSY = "lossy-failover"
ACCEPT = {"failover_may_lose_spends": "accept"}
lossy = _Lossy()


def test_check_fails_a_lossy_failover_that_keeps_the_store_id(
    watched: servers.Replicated, capsys: pytest.CaptureFixture[str]
) -> None:
    """``failover_may_lose_spends=accept``, the replica partitioned after the namespace
    was created: the spends are lost under the same store_id, and the clause says so."""
    lossy.url = watched.sentinel_url
    first: Any = open_ledger(lossy.url, namespace=LOSSY, timeout=TIMEOUT, **ACCEPT)
    with first:
        assert first.store_id is not None
    watched.partition()  # after its genesis reached the replica (WAIT); the primary still
    # counts a connected replica
    code = run_check(
        url=None,
        factory=f"{__name__}:lossy",
        profile="quick",
        failover=_kill_and_wait(watched),
        select="C6_failover",
    )
    table = capsys.readouterr().out
    assert code == 1, table
    assert re.search(r"^C6 .* failed$", table, re.MULTILINE), table
    assert "lost acknowledged spends" in table, table


def test_a_short_torture_with_a_failover(watched: servers.Replicated) -> None:
    """One failover mid-run: no double win, no lost spend; the store_id changed (the
    final read is then not judged: another store, hosts ask again)."""
    result, text = one_failover(watched.sentinel_url, watched.promote)
    assert result.totals.renamed is not None, text


def test_scratch_removal_opens_on_the_sentinels_master(watched: servers.Replicated) -> None:
    """``remove_scratch`` on a ``redis+sentinel://`` URL asks the Sentinels for the master,
    as a ledger does (it once dialled the driver URL's placeholder host)."""
    from tests.scratch_removal import exercise

    exercise(watched.sentinel_url)
