"""The campaign's power: ledgers broken under faults fail a short campaign; the zoo's
correct ledger (same server, same faults) passes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.servers import redis as redis_servers
from tests.zoo.base import ENV

from .conftest import campaign, enter


@pytest.fixture(scope="module")
def zoo_redis() -> Iterator[str]:
    for server in enter(lambda: redis_servers.local_redis(redis_servers.DURABLE),
                        redis_servers.ServerUnavailable):  # fmt: skip
        yield f"127.0.0.1:{server.port}"


@pytest.fixture(autouse=True)
def _zoo_env(zoo_redis: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, zoo_redis)


def test_the_correct_zoo_ledger_passes() -> None:
    result, text = campaign(factory="tests.zoo.base:correct")
    assert result.code == 0, text
    assert result.totals.faults > 0, text
    assert result.verdict.acknowledged > 0, text


def test_acknowledging_a_write_that_never_landed_fails(tmp_path: Path) -> None:
    """``TrueAfterAmbiguous``: when a call fails it answers True without checking, so a
    spend the fault stopped before the server is acknowledged and lost (or won twice)."""
    report = tmp_path / "violations.txt"
    result, text = campaign(factory="tests.zoo.mutants:true_after_ambiguous", report=report)
    assert result.code == 1, text
    assert result.verdict.lost_spends + result.verdict.double_wins > 0, text
    assert str(report) in text
    written = report.read_text()
    assert "the id's whole history" in written
    assert "during:" in written


def test_a_dropped_reply_read_as_false_fails(tmp_path: Path) -> None:
    """``FalseAfterAmbiguous``: a spend whose reply was dropped landed, but it answers
    False: an id nobody else spent reads as already spent (or never spent by anyone)."""
    report = tmp_path / "violations.txt"
    result, text = campaign(factory="tests.zoo.mutants:false_after_ambiguous", report=report)
    assert result.code == 1, text
    assert result.verdict.false_refusals > 0, text
    assert "spend returned False" in report.read_text()
