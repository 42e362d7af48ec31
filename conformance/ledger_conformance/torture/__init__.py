"""Torture: a Jepsen-style fault campaign against one ledger (``decision-ledger torture``).

Worker processes, threads and asyncio tasks spend and read overlapping ids while the fault
proxy breaks the network on a schedule (and a hook restarts the server); every call is
journaled and the whole history is checked per id afterwards. See ``docs/torture.md``.
"""

from __future__ import annotations

from .campaign import Campaign, CampaignError, Result, run
from .checker import Verdict, judge

__all__ = ["Campaign", "CampaignError", "Result", "Verdict", "judge", "run"]
