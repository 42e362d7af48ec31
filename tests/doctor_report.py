"""Run ``decision-ledger doctor URL`` and read its report back, line by line (the
backends' doctor tests share it)."""

from __future__ import annotations

from typing import NamedTuple

import pytest

from ledger_core.cli import main

SLACK = ["--max-rtt", "600"]  # a loaded machine must not fail the round-trip check here


class Line(NamedTuple):
    status: str
    name: str
    detail: str


def parse(out: str) -> list[Line]:
    """The report's check lines (``render``'s columns), without the fix lines."""
    lines = []
    for text in out.splitlines():
        status = text[:5].strip()
        if status in ("PASS", "FAIL", "INFO"):
            lines.append(Line(status, text[6:20].strip(), text[21:]))
    return lines


def doctor(url: str, capsys: pytest.CaptureFixture[str], *, setup: bool = False) -> list[Line]:
    """The doctor's report on ``url`` (set up first when asked); its exit code must say
    what the report says (0 when nothing failed, 1 when something did), and its lines
    must agree with the identity decision (:func:`consistent`)."""
    if setup:
        assert main(["setup", url]) == 0
    capsys.readouterr()
    code = main(["doctor", url, *SLACK])
    lines = parse(capsys.readouterr().out)
    assert code == (1 if any(line.status == "FAIL" for line in lines) else 0), lines
    consistent(lines)
    return lines


def named(lines: list[Line], name: str) -> list[Line]:
    return [line for line in lines if line.name == name]


def consistent(lines: list[Line]) -> None:
    """The configuration lines agree with the identity decision: a ledger that proves
    fails none of them, one that refuses fails at least one."""
    proves = named(lines, "identity")[0].status == "PASS"
    failed = [line for line in named(lines, "configuration") if line.status == "FAIL"]
    assert (not failed) if proves else failed, lines
    assert len(named(lines, "versions")) == 1, lines
    assert "does not itemize" not in named(lines, "versions")[0].detail
    assert "decision-ledger reidentify" in named(lines, "restore")[0].detail  # C6's procedure
