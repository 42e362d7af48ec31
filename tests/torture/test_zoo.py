"""The campaign's power: ledgers broken under faults fail a short campaign; the zoo's
correct ledger (same server, same faults) passes."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.servers import redis as redis_servers
from tests.servers.common import serve_or_skip
from tests.zoo.base import ENV, flush

from .conftest import campaign


@pytest.fixture(scope="module")
def zoo_redis() -> Iterator[str]:
    for server in serve_or_skip(lambda: redis_servers.local_redis(redis_servers.DURABLE)):
        yield f"127.0.0.1:{server.port}"


def _flush(address: str) -> Callable[[], None]:
    host, _, port = address.rpartition(":")
    return lambda: flush((host, int(port)))


@pytest.fixture(autouse=True)
def _zoo_env(zoo_redis: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, zoo_redis)


def test_the_correct_zoo_ledger_passes_and_forgets_cleanly(zoo_redis: str) -> None:
    """Same server, same faults: no violation; after FLUSHALL the old instance fails
    closed and a new open reports a new store_id."""
    result, text = campaign(factory="tests.zoo.base:correct", forget=_flush(zoo_redis))
    assert result.code == 0, text
    assert result.totals.faults > 0, text
    assert result.verdict.acknowledged > 0, text
    assert result.totals.forget is not None, text
    assert result.totals.forget.startswith("passed"), text


def test_an_identity_read_once_fails_the_forget_check(zoo_redis: str, tmp_path: Path) -> None:
    """``ReadsIdentityOnce`` keeps its store_id after the store forgot and answers for
    forgotten ids: exit 1 (no faults needed)."""
    result, text = campaign(
        factory="tests.zoo.torture:reads_identity_once",
        forget=_flush(zoo_redis),
        faults=False,
        duration=2.0,
        report=tmp_path / "violations.txt",
    )
    assert result.code == 1, text
    assert result.totals.forget is not None, text
    assert result.totals.forget.startswith("FAILED"), text
    assert "under the old store_id" in text


def test_dropping_acknowledged_writes_under_faults_fails(tmp_path: Path) -> None:
    """``FlushesLater`` (tests/zoo/torture.py): acknowledged spends are made permanent by
    a background flush whose failures are dropped, so faults lose acknowledged spends."""
    report = tmp_path / "violations.txt"
    result, text = campaign(factory="tests.zoo.torture:flushes_later", report=report)
    assert result.code == 1, text
    # An expired acknowledged spend reads not spent at the end (lost), or is spent True
    # again by another worker first (a double win): either is that defect.
    assert result.verdict.lost_spends + result.verdict.double_wins > 0, text
    assert str(report) in text
    assert "the id's whole history" in report.read_text()


def test_a_dropped_reply_read_as_false_fails(tmp_path: Path) -> None:
    """``FalseAfterAmbiguous``: a spend whose reply was dropped landed, but it answers
    False: an id nobody else spent reads as already spent (or never spent by anyone)."""
    report = tmp_path / "violations.txt"
    result, text = campaign(factory="tests.zoo.mutants:false_after_ambiguous", report=report)
    assert result.code == 1, text
    assert result.verdict.false_refusals > 0, text
    assert "spend returned False" in report.read_text()


def test_a_failover_that_loses_spends_under_one_store_id_fails(tmp_path: Path) -> None:
    """``loses_spends_on_failover`` (tests/zoo/replicated.py): two failovers promote a
    replica 8 writes behind and keep the store_id: acknowledged spends read unspent (or
    win again). No faults: the failovers alone lose them."""
    result, text = campaign(
        factory="tests.zoo.replicated:loses_spends_on_failover",
        faults=False,
        report=tmp_path / "violations.txt",
    )
    assert result.code == 1, text
    assert result.totals.failovers == 2, text
    assert result.verdict.lost_spends + result.verdict.double_wins > 0, text


@pytest.mark.parametrize("factory", ["renames_on_lossy_failover", "synchronous"])
def test_a_failover_that_renames_or_keeps_every_spend_passes(factory: str) -> None:
    """The same failovers, with faults: a lossy one gives the store another store_id (the
    final read is then not judged: another store), a lossless one keeps every spend."""
    result, text = campaign(factory=f"tests.zoo.replicated:{factory}")
    assert result.code == 0, text
    assert result.totals.failovers == 2, text
    assert result.verdict.acknowledged > 0, text
    renamed = result.totals.renamed is not None
    assert renamed == (factory == "renames_on_lossy_failover"), text
