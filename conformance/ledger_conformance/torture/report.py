"""What a person sees: live progress on stderr, the summary, and the violation file
(every broken id: how, then its whole history with the faults on while each call ran).
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from ..history import Op
from .checker import Verdict


@dataclass(frozen=True)
class Window:
    """A fault or a restart, from ``start_ns`` to ``end_ns`` (monotonic)."""

    start_ns: int
    end_ns: int
    what: str


class Progress:
    """Live progress: a rewritten line on a terminal, a plain line every ``every`` s."""

    def __init__(self, stream: TextIO | None = None, *, every: float = 5.0) -> None:
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.every = every
        self.next = every
        self.shown = False

    def update(
        self,
        elapsed: float,
        duration: float,
        ops: int,
        faults: int,
        restarts: int,
        errors: Counter[str],
        now: str,
    ) -> None:
        rate = ops / elapsed if elapsed > 0 else 0.0
        top = ", ".join(f"{k} {v:,}" for k, v in errors.most_common(3)) or "none"
        text = (
            f"{elapsed:5.0f}/{duration:g} s  {ops:,} ops ({rate:,.0f}/s)  faults {faults}"
            f"  restarts {restarts}  [{now}]  errors: {top}"
        )
        if self.tty:
            print(f"\r{text[:119]:<119}", end="", file=self.stream, flush=True)
            self.shown = True
        elif elapsed >= self.next:
            print(text, file=self.stream, flush=True)
            self.next = elapsed + self.every

    def end(self) -> None:
        if self.tty and self.shown:
            print(file=self.stream, flush=True)


@dataclass(frozen=True)
class Totals:
    """The campaign's own figures beside the verdict."""

    seconds: float
    processes: int
    workers: int
    faults: int
    restarts: int
    replies_dropped: int
    routed: bool
    forget: str | None  # the forget check's one-line outcome, when it ran
    failovers: int = 0
    renamed: str | None = None  # a failover gave the store another store_id


def summary(verdict: Verdict, totals: Totals) -> list[str]:
    rate = verdict.operations / totals.seconds if totals.seconds > 0 else 0.0
    errors = ", ".join(f"{k} {v:,}" for k, v in verdict.errors.most_common()) or "none"
    faults = (
        f"{totals.faults} ({totals.replies_dropped:,} replies dropped)"
        if totals.routed
        else "not injected (the URL names no single address the proxy can stand in front of)"
    )
    lines = [
        f"operations        {verdict.operations:,} in {totals.seconds:.1f} s "
        f"({rate:,.0f}/s; {totals.processes} processes, {totals.workers} workers)",
        f"spends            {verdict.spends:,}: {verdict.acknowledged:,} acknowledged (True), "
        f"{verdict.refused:,} already spent (False), {verdict.raised_spends:,} raised",
        f"reads             {verdict.reads:,}; final reads {verdict.final_reads:,}",
        f"faults injected   {faults}",
        f"restarts          {totals.restarts}; failovers {totals.failovers}",
        f"errors            {errors}",
        f"ambiguous         {verdict.raised_spends:,} spends raised or never returned "
        f"({verdict.ambiguous_spends:,} AmbiguousSpend, {verdict.never_returned:,} never "
        f"returned); ids with no True: {verdict.ambiguous_landed:,} read spent at the end, "
        f"{verdict.ambiguous_absent:,} not spent",
    ]
    if totals.forget is not None:
        lines.append(f"forget            {totals.forget}")
    if totals.renamed is not None:
        lines.append(f"failover          {totals.renamed}")
    if verdict.final_unverified:
        lines.append(f"final read        {verdict.final_unverified:,} ids could not be read")
    lines += [
        f"double wins       {verdict.double_wins:,} (must be 0)",
        f"lost spends       {verdict.lost_spends:,} (must be 0)",
        f"false refusals    {verdict.false_refusals:,} (must be 0: False with no spend "
        "that could have won)",
        f"other violations  {verdict.other_violations:,} (must be 0)",
    ]
    if verdict.foreign:
        lines.append(f"not LedgerErrors  {len(verdict.foreign):,} (must be 0)")
    return lines


def _during(op: Op, windows: Sequence[Window]) -> str:
    hits = [w.what for w in windows if w.start_ns < op.complete_ns and op.invoke_ns < w.end_ns]
    return f"  during: {', '.join(dict.fromkeys(hits))}" if hits else ""


def _line(op: Op, start_ns: int, windows: Sequence[Window]) -> str:
    outcome = f"raised {op.error}" if op.error is not None else f"-> {op.result!r}"
    t0, t1 = (op.invoke_ns - start_ns) / 1e6, (op.complete_ns - start_ns) / 1e6
    kind = "spend   " if op.kind == "spend" else "is_spent"
    return f"  [{t0:11.1f} .. {t1:11.1f}] {op.process:<10} {kind} {outcome}{_during(op, windows)}"


def write_violations(
    path: Path,
    verdict: Verdict,
    *,
    header: Sequence[str],
    start_ns: int,
    windows: Sequence[Window],
    limit: int = 200,
) -> None:
    """The offending history slices, one block per id, readable without any tool."""
    by_key: dict[str, list[str]] = {}
    for violation in verdict.violations:
        lines = by_key.setdefault(violation.key, [])
        lines.append(f"  [{violation.clause}] {violation.message}; the ops that prove it:")
        lines.extend("  " + _line(op, start_ns, windows) for op in violation.ops)
    with open(path, "w", encoding="utf-8") as out:
        for line in header:
            out.write(f"# {line}\n")
        out.write("# times: ms from the campaign's start; [invoke .. complete]\n\n")
        for n, (key, lines) in enumerate(by_key.items()):
            if n == limit:
                out.write(f"... and {len(by_key) - limit} more ids\n")
                break
            out.write(f"id {key!r}:\n")
            out.write("\n".join(lines) + "\n")
            out.write("  the id's whole history:\n")
            for op in verdict.slices.get(key, []):
                out.write(_line(op, start_ns, windows) + "\n")
            out.write("\n")
        if verdict.foreign:
            out.write("calls that raised something other than a LedgerError:\n")
            for op in verdict.foreign[:limit]:
                out.write(f"  {op.key!r}" + _line(op, start_ns, windows) + "\n")
