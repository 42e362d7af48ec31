"""The verdict on a campaign's history: per-key linearizability, then the counts.

The end-of-campaign reads are ops of the process ``final``, so an acknowledged spend they
do not find is a lost spend (C2); ambiguous outcomes are counted, never guessed.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from ..history import FINAL, Op, Violation, check
from .recorder import FOREIGN, NEVER_RETURNED

AMBIGUOUS = "AmbiguousSpend"


@dataclass
class Verdict:
    """Everything the summary reports, and the violations with their keys' ops."""

    operations: int = 0
    spends: int = 0
    acknowledged: int = 0  # spends that returned True
    refused: int = 0  # spends that returned False
    reads: int = 0
    raised: int = 0  # calls that raised or never returned
    never_returned: int = 0
    raised_spends: int = 0  # the ambiguous outcomes: a raised spend may or may not have landed
    ambiguous_spends: int = 0  # ... of which the ledger said so (AmbiguousSpend)
    ambiguous_landed: int = 0  # ids with a raised spend and no True, read spent at the end
    ambiguous_absent: int = 0  # ... read not spent at the end
    final_reads: int = 0
    final_unverified: int = 0  # ids the final read could not read
    # Ids, each counted once under its worst violation:
    double_wins: int = 0  # two spends answered True
    lost_spends: int = 0  # acknowledged (or read spent), then read not spent
    false_refusals: int = 0  # a spend answered False that no spend could have beaten
    other_violations: int = 0  # stale reads, non-bool answers
    errors: Counter[str] = field(default_factory=Counter)
    foreign: list[Op] = field(default_factory=list)  # raised something not a LedgerError
    violations: list[Violation] = field(default_factory=list)
    slices: dict[str, list[Op]] = field(default_factory=dict)  # key -> its whole history

    @property
    def failed(self) -> bool:
        return bool(self.violations or self.foreign)


def _error_kind(error: str) -> str:
    return error.split(":", 1)[0]


def judge(ops: Iterable[Op]) -> Verdict:
    """Check every key's history and count what the summary shows."""
    verdict = Verdict()
    by_key: dict[str, list[Op]] = defaultdict(list)
    for op in ops:
        by_key[op.key].append(op)
    for key, key_ops in by_key.items():
        _count(verdict, key_ops)
        found = check(key_ops)
        if not found:
            continue
        verdict.violations.extend(found)
        verdict.slices[key] = sorted(key_ops, key=lambda op: op.invoke_ns)
        kinds = {_kind(violation) for violation in found}
        # One count per id, by its worst violation (a false refusal's id also reads as
        # spent with no winner: one defect, counted once).
        if "double" in kinds:
            verdict.double_wins += 1
        elif "lost" in kinds:
            verdict.lost_spends += 1
        elif "refusal" in kinds:
            verdict.false_refusals += 1
        else:
            verdict.other_violations += 1
    return verdict


def _kind(violation: Violation) -> str:
    witness = violation.ops[0]
    refused = witness.kind == "spend" and witness.result is False
    if (
        violation.clause == "C1"
        and sum(1 for op in violation.ops if op.kind == "spend" and op.result is True) > 1
    ):
        return "double"
    if violation.clause == "C2" and not refused:
        return "lost"  # acknowledged (or read spent), then gone
    if refused:
        return "refusal"  # "already spent", yet no spend could have recorded it first
    return "other"


def _count(verdict: Verdict, ops: list[Op]) -> None:
    won = raised_spend = False
    final: bool | None = None
    for op in ops:
        if op.process == FINAL:
            verdict.final_reads += 1
            if op.ok and isinstance(op.result, bool):
                final = op.result
            continue
        verdict.operations += 1
        if op.error is not None:
            verdict.raised += 1
            kind = _error_kind(op.error)
            verdict.errors[kind] += 1
            if op.error == NEVER_RETURNED:
                verdict.never_returned += 1
            if op.error.startswith(FOREIGN):
                verdict.foreign.append(op)
        if op.kind == "spend":
            verdict.spends += 1
            if op.error is not None:
                verdict.raised_spends += 1
                raised_spend = True
                verdict.ambiguous_spends += _error_kind(op.error) == AMBIGUOUS
            elif op.result is True:
                verdict.acknowledged += 1
                won = True
            elif op.result is False:
                verdict.refused += 1
        else:
            verdict.reads += 1
    if raised_spend and not won:
        if final is True:
            verdict.ambiguous_landed += 1
        elif final is False:
            verdict.ambiguous_absent += 1
