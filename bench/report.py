"""The bench's outputs: a line per cell while it runs, ``bench.md`` and ``bench.png``."""

from __future__ import annotations

import datetime
import math
import os
import platform
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from bench.measure import (
    LEDGER,
    MISSES,
    MODES,
    OPERATIONS,
    PEER,
    RAW,
    SYNC_1,
    UNSETTLED,
    Cell,
    Side,
)

if TYPE_CHECKING:
    from bench.run import Plan, StoreRun

CLIP = 2.0  # the ratio panels' top
TARGET = 0.95  # every backend at least 0.95 of its raw call, or docs/bench.md says why


@dataclass
class Machine:
    """Where and when: the figures mean little without the load they ran under."""

    started: datetime.datetime
    cores: int
    cpu: str
    system: str
    python: str
    load: list[float] = field(default_factory=list)

    @classmethod
    def now(cls) -> Machine:
        cpu = platform.processor() or platform.machine()
        try:
            with open("/proc/cpuinfo", encoding="utf-8") as info:
                for line in info:
                    if line.startswith("model name"):
                        cpu = line.split(":", 1)[1].strip()
                        break
        except OSError:
            pass
        machine = cls(
            datetime.datetime.now(datetime.timezone.utc),
            os.cpu_count() or 0,
            cpu,
            platform.platform(),
            platform.python_version(),
        )
        machine.load.append(os.getloadavg()[0])
        return machine

    def finish(self) -> None:
        self.load.append(os.getloadavg()[0])

    @property
    def loaded(self) -> bool:
        return max(self.load, default=0.0) > self.cores

    def line(self) -> str:
        load = " / ".join(f"{x:.1f}" for x in self.load)
        busy = (
            f"**loaded**: other jobs shared the {self.cores} cores (load average {load} at "
            "start / end), so absolute rates are low and rounds swing; the paired ratios "
            "hold up better"
            if self.loaded
            else f"load average {load} at start / end"
        )
        return f"{self.cores}-core {self.cpu}, {self.system}, Python {self.python}; {busy}."


def _us(seconds: float) -> str:
    return "-" if math.isnan(seconds) else f"{seconds * 1e6:,.0f}"


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def cell_line(cell: Cell) -> str:
    """One line per cell, printed as the bench goes."""
    parts = [f"{cell.store:<8} {cell.mode.label:<9} {cell.operation:<17} @{cell.stored:>9,}"]
    for side in cell.sides:
        parts.append(
            f"{side.name} {side.rate:,.0f}/s p50 {_us(side.percentile(0.5))} us"
            + (f" (ledger/this {_ratio(cell.ratio(side))})" if side.role != LEDGER else "")
        )
    verdict = cell.verdict()
    if verdict is not None and cell.bar is not None:
        parts.append(f"[{cell.bar.label()}: {verdict}, {_interval(cell)}]")
    return "  ".join(parts)


def _interval(cell: Cell) -> str:
    """The bar ratio's 95% interval and the rounds it rests on."""
    side = cell.bar_side()
    found = None if side is None else cell.interval(side)
    if side is None or found is None:
        return "-"
    return f"{found[0]:.2f}-{found[1]:.2f} ({len(cell.ratios(side))} rounds)"


def _marked(cell: Cell | None) -> str:
    """The bar ratio for the summary: bold below its bar, ``?`` when the rounds swing
    across it."""
    side = None if cell is None else cell.bar_side()
    if cell is None or side is None:
        return "-"
    value, verdict = _ratio(cell.ratio(side)), cell.verdict()
    if verdict == MISSES:
        return f"**{value}**"
    return f"{value}?" if verdict == UNSETTLED else value


LEGEND = (
    "Each value is the ledger against the call its bar names (the raw call; MongoDB's "
    "operations: `insert_one + find` and `find`, the raw sequences with the same "
    "guarantee). Bars: 0.95; SQLite's spent-id and `is_spent` cells 0.80 (a 4 µs "
    "statement: the Python around it is the whole gap). **Bold**: below its bar, the "
    "rounds' 95% interval wholly under it; `?`: the rounds swing across the bar even "
    "after extra rounds (an unsettled cell runs up to three times its rounds)."
)


def _first_cells(run: StoreRun) -> list[Cell]:
    """The full matrix: the cells measured at the smallest size."""
    if not run.cells:
        return []
    smallest = min(c.size for c in run.cells)
    by_key = {(c.mode, c.operation): c for c in run.cells if c.size == smallest}
    return [by_key[(m, o)] for m in MODES for o in OPERATIONS if (m, o) in by_key]


def _growth(run: StoreRun) -> list[Cell]:
    return [c for c in run.cells if c.mode == SYNC_1]


def _p50_ratio(ours: Side, raw: Side) -> float | None:
    """Raw p50 / ledger p50: a ratio that preemption stalls on a loaded machine (which
    land in the tail, and so in throughput) barely move."""
    mine, theirs = ours.percentile(0.5), raw.percentile(0.5)
    return theirs / mine if mine > 0 and not math.isnan(mine + theirs) else None


def _head(*columns: str) -> list[str]:
    return ["| " + " | ".join(columns) + " |", "|" + " --- |" * len(columns)]


def _compared(cells: Sequence[Cell]) -> Iterator[tuple[Cell, Side, Side]]:
    """The cells that timed both the ledger and the raw call, with those two sides."""
    for cell in cells:
        ours, raw = cell.side(LEDGER), cell.side(RAW)
        if ours is not None and raw is not None:
            yield cell, ours, raw


def _store_table(run: StoreRun) -> list[str]:
    cells = _first_cells(run)
    peers = sorted({s.name for c in cells for s in c.sides if s.role == PEER})
    raw_name = next((s.name for c in cells for s in c.sides if s.role == RAW), "raw")
    lines = _head(
        "mode",
        "operation",
        "ledger calls/s",
        f"{raw_name} calls/s",
        "**ledger / raw**",
        "bar: verdict",
        "95% interval (rounds)",
        "raw p50 / ledger p50",
        "ledger p50 / p99 µs",
        "raw p50 / p99 µs",
        *(f"ledger / {p}" for p in peers),
    )
    for cell, ours, raw in _compared(cells):
        peer_cols = ""
        for name in peers:
            peer = cell.side(PEER, name)
            peer_cols += f" {_ratio(cell.ratio(peer)) if peer else '-'} |"
        lines.append(
            f"| {cell.mode.label} | {cell.operation} | {ours.rate:,.0f} | {raw.rate:,.0f} | "
            f"**{_ratio(cell.ratio(raw))}** | {_bar(cell)} | {_interval(cell)} | "
            f"{_ratio(_p50_ratio(ours, raw))} | "
            f"{_us(ours.percentile(0.5))} / {_us(ours.percentile(0.99))} | "
            f"{_us(raw.percentile(0.5))} / {_us(raw.percentile(0.99))} |{peer_cols}"
        )
    return lines


def _bar(cell: Cell) -> str:
    verdict, side = cell.verdict(), cell.bar_side()
    if verdict is None or cell.bar is None or side is None:
        return "-"
    shown = "" if cell.bar.against is None else f" ({_ratio(cell.ratio(side))})"
    return f"{cell.bar.label()}{shown}: {verdict}"


def _growth_table(runs: Sequence[StoreRun]) -> list[str]:
    lines = _head("store", "operation", "ids stored", "ledger p50 µs", "raw p50 µs", "ledger / raw")
    for run in runs:
        for cell, ours, raw in _compared(_growth(run)):
            lines.append(
                f"| {run.store} | {cell.operation} | {cell.stored:,} | "
                f"{_us(ours.percentile(0.5))} | {_us(raw.percentile(0.5))} | "
                f"{_ratio(cell.ratio(raw))} |"
            )
    return lines


def _summary(runs: Sequence[StoreRun]) -> list[str]:
    """One line per store: ledger / raw per operation, each as sync x1 / sync x32 / async
    x64 (for the README)."""
    modes = " / ".join(m.label for m in MODES)
    lines = _head("store", *(f"{op}: {modes}" for op in OPERATIONS))
    for run in runs:
        found = {(c.mode, c.operation): c for c in _first_cells(run)}
        if not found:
            continue
        columns = []
        for operation in OPERATIONS:
            values = [_marked(found.get((mode, operation))) for mode in MODES]
            columns.append(" / ".join(values))
        lines.append(f"| {run.store} | " + " | ".join(columns) + " |")
    return lines


README_START, README_END = "<!-- bench:summary -->", "<!-- /bench:summary -->"
BY_HAND = "<!-- bench:by-hand: kept by every run -->"


def keep_by_hand(old: str | None, new: str) -> str:
    """``new`` with the part of ``old`` from :data:`BY_HAND` on appended: figures measured
    by hand (other commands, targeted runs) survive a re-run of the bench."""
    if not old or BY_HAND not in old:
        return new
    return new.rstrip("\n") + "\n\n" + old[old.index(BY_HAND) :]


def splice_summary(readme: str, runs: Sequence[StoreRun], machine: Machine) -> str:
    """The README with the text between its two summary markers rewritten."""
    start, end = readme.index(README_START), readme.index(README_END)
    loaded = "a loaded " if machine.loaded else ""
    body = [
        "",
        f"Measured {machine.started:%Y-%m-%d} on {loaded}{machine.cores}-core machine "
        f"(load average {max(machine.load, default=0):.1f}); ledger / raw throughput, "
        "median of paired rounds; **bold**: below its bar, `?`: the rounds swing across "
        "it ([docs/bench.md](docs/bench.md)):",
        "",
        *_summary(runs),
        "",
    ]
    return readme[: start + len(README_START)] + "\n".join(body) + readme[end:]


def markdown(
    runs: Sequence[StoreRun], machine: Machine, command: str, plan: Plan, chart: str, note: str
) -> str:
    versions: dict[str, str] = {}
    for run in runs:
        versions.update(run.versions)
    out = [
        "# Benchmark: every backend against its raw driver call",
        "",
        "Written by `python -m bench` (do not edit by hand; re-run it instead). Command:",
        "",
        f"    {command}",
        "",
        f"- Date: {machine.started:%Y-%m-%d %H:%M} UTC.",
        f"- Machine: {machine.line()}" + (f" {note}" if note else ""),
        "- Versions: " + ", ".join(f"{k} {v}" for k, v in sorted(versions.items())) + ".",
        f"- Plan: {plan.rounds} alternating rounds of {plan.seconds:g} s per contender and cell; "
        "ids stored: " + ", ".join(f"{s:,}" for s in plan.sizes) + ".",
        "",
        "How to read it: each row times one operation with 1 thread, 32 threads or 64 asyncio "
        "tasks, the ledger against the raw driver primitive a host would write by hand, on "
        "the same connection or pool and the same store, in rounds that alternate (ABBA) so "
        "load that comes and goes hits both sides. **ledger / raw** is the median of the "
        "per-round throughput ratios (1.00: the ledger costs nothing measurable; above 1: "
        "faster, which happens when the raw call takes an exception path, e.g. a duplicate "
        "key); **raw p50 / ledger p50** compares the median calls, which scheduler stalls on "
        "a loaded machine (they land in the tail, and so in throughput) barely move. "
        "**bar: verdict** holds the ledger to its target: *meets* or *misses* when the "
        "distribution-free 95% interval of the median ratio (order statistics of the "
        "rounds) lies wholly on one side of it, *unsettled* when the rounds swing across "
        "it; such a cell takes extra rounds, up to three times its plan, before it says so. "
        "Latencies are per call, over every call of every round. `spend (new id)` "
        "writes; `spend (spent id)` is the losing path (the raw call's duplicate-key "
        "answer); `is_spent` reads an id that is spent. Peers are other libraries' closest "
        "calls (not ledgers: see the backend docs for why). Nothing here is asserted by a "
        "test; CI runs `python -m bench --quick` only to prove the command works.",
        "",
        f"![ledger / raw ratios and cost growth]({chart})",
        "",
        "## Summary",
        "",
        *_summary(runs),
        "",
        LEGEND,
        "",
    ]
    for run in runs:
        out += [f"## {run.store}", ""]
        if run.skipped:
            out += [f"Not measured: {run.skipped}.", ""]
            continue
        out += [f"Server: {run.server}; {run.url}; {run.seconds:.0f} s.", ""]
        out += _store_table(run)
        out += [""]
        out += [f"- {note}" for note in run.notes]
        if run.notes:
            out += [""]
    out += [
        "## Cost as the store grows (sync x1)",
        "",
        "The store is preloaded with ids by its fastest bulk path (`COPY`, pipelined `SET`, "
        "`insert_many`, `BatchWriteItem`, one `executemany` transaction); the count includes "
        "the ids the bench itself spent.",
        "",
        *_growth_table(runs),
        "",
    ]
    return "\n".join(out)


def chart(runs: Sequence[StoreRun], machine: Machine, path: Path) -> None:
    """Top: ledger / raw per store, mode and operation. Bottom: p50 per call (sync x1)
    against the ids already stored, ledger solid, raw dashed, one colour per store."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    measured = [r for r in runs if r.cells]
    fig, axes = plt.subplots(2, len(OPERATIONS), figsize=(16, 9))
    colors = ("#4c72b0", "#dd8452", "#55a868")
    width = 0.8 / len(MODES)
    for ax, operation in zip(axes[0], OPERATIONS, strict=True):
        for i, mode in enumerate(MODES):
            xs, ys = [], []
            for x, run in enumerate(measured):
                for cell in _first_cells(run):
                    raw = cell.side(RAW)
                    value = cell.ratio(raw) if raw and cell.mode == mode else None
                    if cell.operation == operation and value is not None:
                        xs.append(x + (i - 1) * width)
                        ys.append(value)
            ax.bar(xs, ys, width, label=mode.label, color=colors[i])
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.axhline(TARGET, color="red", linewidth=0.8, linestyle=":", label=f"{TARGET} target")
        ax.set_xticks(range(len(measured)), [r.store for r in measured])
        ax.set_title(f"{operation}: ledger / raw throughput")
        top = max([1.2, *(bar.get_height() + 0.05 for bar in ax.patches)])
        if top > CLIP:  # one wild round on a loaded machine must not flatten the rest
            top = CLIP
            for bar in ax.patches:
                if bar.get_height() > CLIP:
                    ax.text(bar.get_x(), CLIP * 0.97, f"{bar.get_height():.1f}", fontsize=7)
        ax.set_ylim(0, top)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", ncol=4, bbox_to_anchor=(0.5, 0.955))
    for ax, operation in zip(axes[1], OPERATIONS, strict=True):
        for run in measured:
            cells = [c for c in _growth(run) if c.operation == operation]
            xs = [c.stored for c in cells]
            (line,) = ax.plot(
                xs, [_p50_us(c.side(LEDGER)) for c in cells], marker="o", label=run.store
            )
            ax.plot(
                xs,
                [_p50_us(c.side(RAW)) for c in cells],
                marker="x",
                linestyle="--",
                color=line.get_color(),
            )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: _count(v)))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
        ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
        ax.set_xlabel("ids already stored")
        ax.set_ylabel("p50 µs per call (sync x1)")
        ax.set_title(f"{operation}: ledger (solid) and raw (dashed)")
        ax.legend(fontsize=8)
    fig.suptitle(
        f"decision-ledger vs the raw driver call, {machine.started:%Y-%m-%d}: "
        f"{'a loaded ' if machine.loaded else ''}{machine.cores}-core machine"
        f" (load average {max(machine.load, default=0):.1f})"
    )
    fig.tight_layout(rect=(0, 0, 1, 0.93))
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _p50_us(side: Side | None) -> float:
    return float("nan") if side is None else side.percentile(0.5) * 1e6


def _count(value: float) -> str:
    for unit, size in (("M", 1e6), ("k", 1e3)):
        if value >= size:
            return f"{value / size:g}{unit}"
    return f"{value:g}"
