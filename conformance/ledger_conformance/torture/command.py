"""``decision-ledger torture``: the arguments, and the campaign's exit code.

Exit codes follow the CLI: 0 passed; 1 a violation (the offending histories are written
to a file whose path is printed); 2 usage; 3 the store or a hook failed, or the campaign
could not prove everything (a worker could not open the ledger, an id could not be read at
the end); 130 interrupted with no violation in what ran.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import fields
from pathlib import Path

from ..hooks import HookFailed, ShellHook
from ..loading import FactoryPathError
from .campaign import UNAVAILABLE, USAGE, Campaign, CampaignError, run


def parse(argv: list[str]) -> argparse.Namespace:
    """The campaign's flags (argparse exits 2 on bad usage, like the rest of the CLI)."""
    cmd = argparse.ArgumentParser(
        prog="decision-ledger torture",
        description="Concurrent spends and reads under injected faults, every call "
        "journaled and the history checked per id (docs/torture.md).",
    )
    cmd.add_argument("url", nargs="?", help="ledger URL (a scratch namespace is used)")
    cmd.add_argument("--factory", help="package.module:callable building the ledger")
    cmd.add_argument("--duration", type=float, default=30.0, help="seconds (default 30)")
    cmd.add_argument("--max-ops", type=int, default=2_000_000, help="operation budget")
    cmd.add_argument("--processes", type=int, default=2, help="worker OS processes (2)")
    cmd.add_argument("--threads", type=int, default=4, help="threads per process (4)")
    cmd.add_argument("--tasks", type=int, default=8, help="asyncio tasks per process (8)")
    cmd.add_argument("--hot", type=int, default=4, help="ids every worker contends for")
    cmd.add_argument("--cold", type=int, default=32, help="ids per small group of workers")
    cmd.add_argument(
        "--generation", type=float, default=1.0, help="seconds before a fresh set of ids"
    )
    cmd.add_argument("--seed", type=int, help="the fault schedule's and workers' seed")
    cmd.add_argument("--no-faults", action="store_true", help="no fault proxy in the path")
    cmd.add_argument(
        "--restart", metavar="CMD", help="shell command that kills and restarts the server"
    )
    cmd.add_argument("--restarts", type=int, default=2, help="restarts in the run (2)")
    cmd.add_argument(
        "--failover",
        metavar="CMD",
        help="shell command that fails the store over to a replica (see docs/conformance.md)",
    )
    cmd.add_argument("--failovers", type=int, default=2, help="failovers in the run (2)")
    cmd.add_argument(
        "--forget",
        metavar="CMD",
        help="shell command that makes the store forget everything (checked at the end)",
    )
    cmd.add_argument("--report", type=Path, help="where to write the violations")
    cmd.add_argument(
        "--progress-every", type=float, default=5.0, help="seconds between plain progress lines"
    )
    cmd.add_argument("--debug", action="store_true", help="show the traceback of exit 4")
    return cmd.parse_args(argv)


def main(args: argparse.Namespace) -> int:
    try:
        # Every flag sets the Campaign field of its name (--no-faults is inverted).
        values = {f.name: getattr(args, f.name) for f in fields(Campaign) if hasattr(args, f.name)}
        for name in ("restart", "forget", "failover"):  # shell commands, run as hooks
            values[name] = ShellHook(name, values[name]) if values[name] else None
        campaign = Campaign(**values, faults=not args.no_faults)
        campaign.check()
    except ValueError as exc:
        print(f"decision-ledger torture: {exc}", file=sys.stderr)
        return USAGE
    try:
        return run(campaign, err=sys.stderr, out=sys.stdout).code
    except (FactoryPathError, CampaignError, HookFailed) as exc:
        print(f"decision-ledger torture: {exc}", file=sys.stderr)
        return USAGE if isinstance(exc, FactoryPathError) else UNAVAILABLE
