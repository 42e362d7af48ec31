"""The README's "A host, in twenty lines" runs as written, and a denial never runs the tool."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from ledger_core.protocol import close_ledger

ROOT = Path(__file__).resolve().parents[1]


def snippet() -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## A host, in twenty lines") :]
    found = re.search(r"```python\n(.*?)```", section, re.S)
    assert found is not None
    return found.group(1)


def run(answers: list[bool]) -> list[tuple[str, Any]]:
    """The snippet once per answer, against one ledger file; what the host did each time."""
    did: list[tuple[str, Any]] = []
    code = compile(snippet(), "README.md", "exec")
    for answer in answers:
        names: dict[str, Any] = {
            "answer": answer,
            "run_tool_call": lambda: did.append(("ran", None)),
            "ask_again": lambda: did.append(("ask-again", None)),
            "keep_pause_open": lambda: did.append(("keep-open", None)),
            "tell_person": lambda verdict: did.append(("told", verdict)),
            "record_outcome": lambda verdict, reason: did.append(("closed", verdict)),
        }
        exec(code, names)
        close_ledger(names["ledger"])
    return did


def test_a_denial_does_not_run_the_tool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert run([False, True]) == [
        ("told", "denied"),
        ("closed", "possibly-run"),  # spent by the denial: no proof of never-ran is claimed
        ("told", "already-spent"),  # the later approval cannot run it
        ("closed", "possibly-run"),
    ]


def test_an_approval_runs_it_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert run([True, True]) == [
        ("ran", None),
        ("closed", "possibly-run"),
        ("told", "already-spent"),
        ("closed", "possibly-run"),
    ]
