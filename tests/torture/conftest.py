"""Short torture campaigns in CI: one server per backend from the tests/servers harness."""

from __future__ import annotations

import io
from typing import Any, TypeVar

from ledger_conformance.torture import Campaign, Result, run

T = TypeVar("T")

# Small and quick: a few seconds per backend (CI budget), every fault kind still injected.
SHORT = {"duration": 3.0, "processes": 2, "threads": 2, "tasks": 4, "progress_every": 1.0}


def campaign(**options: Any) -> tuple[Result, str]:
    """Run a short campaign; (result, everything it printed)."""
    err, out = io.StringIO(), io.StringIO()
    result = run(Campaign(**{**SHORT, **options}), err=err, out=out)
    return result, out.getvalue() + err.getvalue()


def one_failover(url: str, failover: Any) -> tuple[Result, str]:
    """A short campaign without network faults and one failover, checked as every
    replicated topology must pass it: 0 double wins, 0 lost spends, some acknowledged."""
    result, text = campaign(url=url, faults=False, failover=failover, failovers=1)
    assert result.code == 0, text
    assert result.totals.failovers == 1, text
    assert result.verdict.double_wins == 0, text
    assert result.verdict.lost_spends == 0, text
    assert result.verdict.acknowledged > 0, text
    return result, text
