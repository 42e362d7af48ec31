"""Issue 12's flake check as a user runs it: ``decision-ledger check URL`` (the quick
profile, one ledger) N times in a row per backend, against a server the test harness
starts (a URL from the environment, else a local binary on a free port).

Stops at the first failing round and prints its output; otherwise prints each round's
wall time (the CLI's start-up included) and a min / median / max per backend. By hand,
not CI: ``python scripts/check_soak.py [--rounds 20] [backend ...]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the harness lives in tests/ and bench/

from bench.stores import module  # noqa: E402

BACKENDS = ("sqlite", "redis", "postgres", "mongodb", "dynamodb")


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def soak(backend: str, rounds: int, extra: list[str], options: str) -> int:
    with module(backend).server() as url:
        if options:
            url += ("&" if "?" in url else "?") + options
        times: list[float] = []
        for round_ in range(1, rounds + 1):
            start = time.monotonic()
            done = subprocess.run(
                ["decision-ledger", "check", url, *extra],
                capture_output=True,
                text=True,
                check=False,
            )
            took = time.monotonic() - start
            last = (done.stdout.strip().splitlines() or ["(no output)"])[-1]
            if done.returncode != 0:
                print(f"{backend} round {round_} FAILED (exit {done.returncode}) in {took:.1f} s")
                print(done.stdout[-6000:], done.stderr[-3000:], sep="\n")
                return 1
            times.append(took)
            print(f"{backend} round {round_} passed in {took:.1f} s (load {load()}): {last}")
            sys.stdout.flush()
    print(
        f"{backend}: {rounds} rounds, no flake; seconds min {min(times):.1f}, "
        f"median {statistics.median(times):.1f}, max {max(times):.1f}"
    )
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("backends", nargs="*", default=list(BACKENDS))
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--thorough", action="store_true", help="the thorough profile instead")
    parser.add_argument(
        "--url-options",
        default="",
        help="ledger options added to every URL's query, e.g. timeout=30 (say so with the times)",
    )
    args = parser.parse_args()
    os.environ.setdefault("LEDGER_STRICT", "1")  # a missing server fails, never skips
    extra = ["--thorough"] if args.thorough else []
    timeout = dict(part.split("=", 1) for part in args.url_options.split("&") if "=" in part).get(
        "timeout"
    )
    if timeout:  # C4's bound covers the longer whole-call timeout (a spend and its read-back)
        extra += ["--call-bound", f"{2 * float(timeout) + 2:g}"]
    print(f"load average at start: {load()}")
    for backend in args.backends:
        if soak(backend, args.rounds, extra, args.url_options):
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
