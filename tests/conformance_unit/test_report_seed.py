"""The report's header names the run's seed and how to replay it: a failure on a generated
input (an id, a name, a caller, a model sequence) reproduces from the header alone. The
seed drives Hypothesis's sequences too (M1, C8), not only the axes' draws. And a row
says what was left out apart from what ran."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ledger_conformance.report import CaseOutcome, render, summarize
from ledger_conformance.runner import run_check

REPLAY = "axes seed 4242 (replay this run's draws with LEDGER_CONFORMANCE_SEED=4242)"


def test_the_header_carries_the_profile_and_the_seed() -> None:
    rows = summarize([CaseOutcome("C1", "test_C1_a", "passed")])
    lines = render(rows, profile="quick", elapsed=3.21, seed=4242, width=200).splitlines()
    assert lines[0] == f"profile quick; {REPLAY}"
    assert lines[-1] == "profile quick, 3.2 s"


def test_notes_are_not_read_as_parts_left_out() -> None:
    """A partly exercised row says what was left out, then what the passing tests noted
    (M1's counts of calls from a new interpreter read as left out)."""
    rows = summarize(
        [
            CaseOutcome("M1", "test_M1_a", "passed", notes=("9 sequences, 13 calls",)),
            CaseOutcome("M1", "test_M1_b", "skipped", "not exercised: no hook"),
        ]
    )
    assert rows[0].detail == (
        "1 test(s) passed; left out: not exercised: no hook (test_M1_b). "
        "Noted: 9 sequences, 13 calls"
    )


def test_a_check_replays_its_seed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two checks under one seed draw the same model sequences (the counts of what they
    did agree), and both say the seed in the header and in the JSON report."""
    monkeypatch.setenv("LEDGER_CONFORMANCE_SEED", "4242")
    notes = []
    for run in ("one", "two"):
        report = tmp_path / f"{run}.json"
        code = run_check(
            url=f"sqlite:///{tmp_path / run}.db",
            factory=None,
            profile="quick",
            select="M1_random and not async",  # one test: the sync sequences
            report=str(report),
        )
        out = capsys.readouterr().out
        assert code == 0, out
        assert f"profile quick; {REPLAY}" in " ".join(out.split()), out
        document = json.loads(report.read_text())
        assert document["seed"] == 4242
        notes.append([clause["notes"] for clause in document["clauses"]])
    assert notes[0] == notes[1]
    assert "sequences" in str(notes[0])
