"""``python -m bench``: every store with a server here (and every URL given), one report.

For each store: start its server with the tests' harness (``tests/servers``), open the
ledger and, on the same connection or pool, the raw driver primitive and the installed
peers; preload ids to the first size, run every mode (sync x1, sync x32, async x64) and
every operation in alternating rounds; then grow the store to each further size and run
sync x1 again, to show how a call's cost grows with the ids already stored. Writes
``bench.md`` and ``bench.png`` (``docs/`` by default; ``--quick`` writes only with
``--out``). Ratios are for people to read: nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import asyncio
import shlex
import sys
import time
import traceback
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from bench import measure, report
from bench.measure import (
    ASYNC_64,
    LEDGER,
    MODES,
    OPERATIONS,
    RAW,
    SPEND_NEW,
    SYNC_1,
    Cell,
    Mode,
    Spec,
)
from bench.stores import ORDER, Subject, for_url, module

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Plan:
    sizes: tuple[int, ...]
    rounds: int
    seconds: float
    preload_budget: float
    modes: tuple[Mode, ...] = MODES
    settle: int = 3  # a cell swinging across its bar runs up to settle x rounds


FULL = Plan(sizes=(1_000, 100_000, 1_000_000), rounds=7, seconds=0.3, preload_budget=240.0)
QUICK = Plan(sizes=(200, 1_000), rounds=2, seconds=0.03, preload_budget=20.0, settle=1)


@dataclass
class StoreRun:
    """What one store gave: its cells, or why it was skipped, and what it notes."""

    store: str
    url: str
    server: str = ""
    versions: dict[str, str] = field(default_factory=dict)
    cells: list[Cell] = field(default_factory=list)
    skipped: str | None = None
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0


class _Stored:
    """How many ids the store holds (about): preloaded, plus every new spend measured."""

    def __init__(self) -> None:
        self.preloaded = 0
        self.cells: list[Cell] = []

    def __call__(self) -> int:
        spent = sum(
            len(side.latencies)
            for cell in self.cells
            if cell.operation == SPEND_NEW
            for side in cell.sides
        )
        return self.preloaded + spent


def _preload(subject: Subject, stored: _Stored, target: int, budget: float) -> str | None:
    """Grow the store to ``target`` ids in chunks; stop (and say why) past ``budget``."""
    started = time.monotonic()
    chunk, done = 10_000, 0
    while (need := target - stored()) > 0:
        step = min(chunk, need)
        subject.preload(range(stored.preloaded, stored.preloaded + step))
        stored.preloaded += step
        done += step
        took = time.monotonic() - started
        rate = done / took if took > 0 else float("inf")
        if need > step and took + (need - step) / rate > budget:
            return (
                f"{target:,} ids not reached: preloading ran at {rate:,.0f} ids/s and would "
                f"take over {budget:.0f} s (stopped at {stored():,}, measured there)"
            )
        chunk = min(chunk * 2, 200_000)
    return None


def _spec(
    subject: Subject, plan: Plan, stored: int, mode: Mode, operation: str, *, settle: bool
) -> Spec:
    """One cell's plan; the growth cells (``settle`` false) only show a trend."""
    return Spec(
        subject.store,
        stored,
        mode,
        operation,
        plan.rounds,
        plan.seconds,
        bar=subject.bar(operation),
        max_rounds=plan.rounds * (plan.settle if settle else 1),
    )


def _run_store(subject: Subject, plan: Plan, run: StoreRun) -> None:
    stored = _Stored()
    measure.warm_up(subject.contenders)
    reached = 0
    for index, size in enumerate(plan.sizes):
        if reached:  # the last size could not be reached in the budget: stop growing
            break
        why = _preload(subject, stored, size, plan.preload_budget)
        if why is not None:  # still measure where the store got to, then stop
            run.notes.append(why)
            reached = stored()
        first = index == 0
        contenders = [
            c for c in subject.contenders if first or c.role in (LEDGER, RAW)
        ]  # peers only at the first size: the growth lines compare ledger and raw
        for mode in plan.modes if first else (SYNC_1,):
            if mode.is_async:
                continue
            for operation in OPERATIONS:
                spec = _spec(subject, plan, stored(), mode, operation, settle=first)
                cell = measure.sync_cell(spec, contenders)
                if cell is not None:
                    cell.size = reached or size
                    stored.cells.append(cell)
                    print(report.cell_line(cell), flush=True)
        if first and ASYNC_64 in plan.modes and subject.open_async is not None:
            asyncio.run(_async_cells(subject, plan, stored, reached or size))
    run.cells = stored.cells


async def _async_cells(subject: Subject, plan: Plan, stored: _Stored, size: int) -> None:
    assert subject.open_async is not None
    async with subject.open_async() as contenders:
        await measure.warm_up_async(contenders, ASYNC_64.workers)
        for operation in OPERATIONS:
            spec = _spec(subject, plan, stored(), ASYNC_64, operation, settle=True)
            cell = await measure.async_cell(spec, contenders)
            if cell is not None:
                cell.size = size
                stored.cells.append(cell)
                print(report.cell_line(cell), flush=True)


def bench_store(name: str, url: str | None, plan: Plan) -> StoreRun:
    """One store, on its harness server (``url`` None) or on ``url``."""
    found = module(name)
    run = StoreRun(name, url or "local server (tests/servers)")
    started = time.monotonic()
    with ExitStack() as stack:
        try:
            where = url or stack.enter_context(found.server())
        except found.UNAVAILABLE as exc:
            run.skipped = f"no server: {exc}"
            return run
        subject = found.subject(where, stack)
        run.server, run.versions = subject.server, subject.versions
        run.notes.extend(subject.notes)
        print(f"== {name}: {subject.server}", flush=True)
        _run_store(subject, plan, run)
    run.seconds = time.monotonic() - started
    return run


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench", description=__doc__.splitlines()[0] if __doc__ else None
    )
    parser.add_argument("urls", nargs="*", help="also bench the ledger at each URL")
    parser.add_argument(
        "--only", help=f"comma-separated stores to start locally (default: {','.join(ORDER)})"
    )
    parser.add_argument("--no-local", action="store_true", help="bench only the URLs given")
    parser.add_argument("--quick", action="store_true", help="seconds per store: proves it runs")
    parser.add_argument("--sizes", help="ids already stored, comma-separated (1000,100000,...)")
    parser.add_argument("--rounds", type=int, help="alternating rounds per cell")
    parser.add_argument("--seconds", type=float, help="seconds per contender and round")
    parser.add_argument(
        "--settle",
        type=int,
        help="a cell whose rounds swing across its bar runs up to this many times its "
        "rounds (3; --quick 1)",
    )
    parser.add_argument("--preload-budget", type=float, help="seconds allowed to grow a store")
    parser.add_argument("--out", type=Path, help="where bench.md and bench.png go (docs/)")
    parser.add_argument(
        "--machine-note", default="", help="said under the machine line (e.g. 'quiet machine')"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    base = QUICK if args.quick else FULL
    plan = Plan(
        sizes=tuple(int(s) for s in args.sizes.split(",")) if args.sizes else base.sizes,
        rounds=args.rounds or base.rounds,
        seconds=args.seconds or base.seconds,
        preload_budget=args.preload_budget or base.preload_budget,
        settle=args.settle or base.settle,
    )
    out: Path | None = args.out or (None if args.quick else REPO / "docs")
    names = [] if args.no_local else (args.only.split(",") if args.only else list(ORDER))
    unknown = sorted(set(names) - set(ORDER))
    if unknown:
        raise SystemExit(f"unknown store(s) {unknown}: choose from {', '.join(ORDER)}")
    machine = report.Machine.now()
    runs: list[StoreRun] = []
    targets: list[tuple[str, str | None]] = [(n, None) for n in names]
    targets += [(for_url(u).NAME, u) for u in args.urls]
    for name, url in targets:
        try:
            runs.append(bench_store(name, url, plan))
        except Exception as exc:  # one store failing must not hide the others' figures
            traceback.print_exc()
            runs.append(StoreRun(name, url or "local server", skipped=f"failed: {exc!r}"))
    machine.finish()
    command = "python -m bench " + shlex.join(list(argv if argv is not None else sys.argv[1:]))
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        chart = out / "bench.png"
        report.chart(runs, machine, chart)
        page = out / "bench.md"
        fresh = report.markdown(runs, machine, command.strip(), plan, chart.name, args.machine_note)
        page.write_text(report.keep_by_hand(page.read_text() if page.exists() else None, fresh))
        print(f"wrote {out / 'bench.md'} and {chart}")
        readme = REPO / "README.md"
        if out.resolve() == (REPO / "docs").resolve() and report.README_START in readme.read_text():
            readme.write_text(report.splice_summary(readme.read_text(), runs, machine))
            print(f"rewrote the summary in {readme}")
    failed = [r for r in runs if r.skipped and r.skipped.startswith("failed")]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
