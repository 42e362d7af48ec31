"""The suite's commands behind ``decision-ledger check`` and ``decision-ledger torture``:
the one module of the suite ``ledger_core.cli`` names. Importing it imports what both
need (pytest among them), so a missing extra fails that one import, which the CLI says."""

from __future__ import annotations

from typing import Any

from . import runner
from .torture.command import main as torture
from .torture.command import parse as torture_parse


def check(**options: Any) -> int:
    """``decision-ledger check``: :func:`ledger_conformance.runner.run_check`."""
    return runner.run_check(**options)


__all__ = ["check", "torture", "torture_parse"]
