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
