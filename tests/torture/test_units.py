"""The campaign's parts without a server: journal, schedule, checker, CLI usage."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ledger_conformance.faults import Toxic
from ledger_conformance.history import FINAL, Op
from ledger_conformance.torture import judge, schedule
from ledger_conformance.torture.recorder import FOREIGN, NEVER_RETURNED, Journal, load
from ledger_core.cli import main
from ledger_core.errors import AmbiguousSpend

WAIT = 120.0  # bound on a CLI subprocess


def op(
    who: str, kind: str, key: str, t0: int, t1: int, result: object, error: str | None = None
) -> Op:
    return Op(who, kind, key, t0, t1, result, error)  # type: ignore[arg-type]


def test_journal_round_trip_and_a_call_that_never_returned(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    journal = Journal(path)
    a = journal.invoke("p0-t0", "s", "id-1", 10)
    journal.complete(a, 20, True, None)
    b = journal.invoke("p0-t1", "r", "id-1", 30)
    journal.complete(b, 40, None, "LedgerUnavailable: down")
    journal.invoke("p0-a0", "s", "id-2", 50)  # its process was killed mid-call
    journal.close()
    with open(path, "a") as cut:
        cut.write('["I", 9, "p0-t0", "s", "id-3"')  # a line cut by the kill: not an op
    loaded = load([path], end_ns=1000)
    assert loaded.never_returned == 1
    by_key = {(o.key, o.kind): o for o in loaded.ops}
    assert by_key[("id-1", "spend")] == op("p0-t0", "spend", "id-1", 10, 20, True)
    assert by_key[("id-1", "is_spent")].error == "LedgerUnavailable: down"
    assert by_key[("id-2", "spend")] == op("p0-a0", "spend", "id-2", 50, 1000, None, NEVER_RETURNED)
    assert len(loaded.ops) == 3


def test_invoke_is_on_disk_before_the_call(tmp_path: Path) -> None:
    """A process killed mid-call must still show the call it was in."""
    path = tmp_path / "j.jsonl"
    journal = Journal(path)
    journal.invoke("p0-t0", "s", "id", 1)
    assert json.loads(path.read_text()) == ["I", 0, "p0-t0", "s", "id", 1]
    journal.close()


def test_errors_that_are_not_ledger_errors_are_marked(tmp_path: Path) -> None:
    from ledger_conformance.torture.recorder import error_line

    assert error_line(AmbiguousSpend("x\ny")) == "AmbiguousSpend: x | y"
    assert error_line(KeyError("k")).startswith(FOREIGN + "KeyError")
    verdict = judge([op("p0-t0", "spend", "k", 1, 2, None, error_line(KeyError("k")))])
    assert verdict.failed
    assert len(verdict.foreign) == 1


def test_schedule_injects_every_toxic_and_ends_calm() -> None:
    events = schedule.build(4.0, seed=7, faults=True, restarts=1)
    toxics = [e.toxic for e in events if e.toxic is not None]
    assert set(schedule.FAULTS) <= set(toxics)
    assert toxics[-1] is Toxic.PASS
    assert max(e.at for e in events) <= 4.0 - schedule.MIN_TAIL
    assert sum(e.restart for e in events) == 1
    assert events == schedule.build(4.0, seed=7, faults=True, restarts=1)  # reproducible
    assert [e for e in schedule.build(4.0, seed=7, faults=False, restarts=0)] == []


def test_checker_counts_double_wins_lost_spends_and_false_refusals() -> None:
    ops = [
        # two winners on one id
        op("p0-t0", "spend", "double", 0, 10, True),
        op("p1-t0", "spend", "double", 0, 10, True),
        # acknowledged, then the final read does not find it
        op("p0-t0", "spend", "lost", 0, 10, True),
        op(FINAL, "is_spent", "lost", 100, 110, False),
        # False with nobody that could have won; the final read finds it (the write landed)
        op("p0-t0", "spend", "refused", 0, 10, False),
        op(FINAL, "is_spent", "refused", 100, 110, True),
        # ambiguous: raised, never acknowledged; the final read says it landed
        op("p0-t0", "spend", "ambiguous", 0, 10, None, "AmbiguousSpend: reply lost"),
        op(FINAL, "is_spent", "ambiguous", 100, 110, True),
        # fine: one winner, a loser, reads after
        op("p0-t0", "spend", "fine", 0, 10, True),
        op("p1-t0", "spend", "fine", 5, 20, False),
        op("p1-t1", "is_spent", "fine", 30, 40, True),
        op(FINAL, "is_spent", "fine", 100, 110, True),
    ]
    verdict = judge(ops)
    assert verdict.double_wins == 1
    assert verdict.lost_spends == 1
    assert verdict.false_refusals == 1
    assert verdict.other_violations == 0
    assert verdict.ambiguous_spends == 1
    assert verdict.ambiguous_landed == 1
    assert set(verdict.slices) == {"double", "lost", "refused"}
    assert verdict.acknowledged == 4
    assert verdict.operations == 8


def test_a_stale_read_after_an_acknowledged_spend_is_a_violation() -> None:
    verdict = judge(
        [op("p0-t0", "spend", "k", 0, 10, True), op("p1-a3", "is_spent", "k", 20, 30, False)]
    )
    assert verdict.other_violations == 1
    assert verdict.failed


@pytest.mark.parametrize(
    "argv",
    [
        ["torture"],
        ["torture", "sqlite:///x.db", "--factory", "m:f"],
        ["torture", "sqlite:///x.db", "--duration", "0"],
        ["torture", "sqlite:///x.db", "--processes", "0"],
        ["torture", "--factory", "no_such_module_here:f"],
    ],
)
def test_usage_is_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    assert "decision-ledger torture" in capsys.readouterr().err


def test_the_cli_imports_the_campaign_only_when_asked() -> None:
    code = "import sys, ledger_core.cli; print('ledger_conformance' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=WAIT
    )
    assert done.stdout.strip() == "False", done.stderr


def test_ctrl_c_stops_with_a_summary(tmp_path: Path) -> None:
    """SIGINT to the conductor: workers stop, the history is checked, exit 130."""
    exe = Path(sys.executable).parent / "decision-ledger"
    proc = subprocess.Popen(
        [str(exe), "torture", f"sqlite:///{tmp_path}/l.db", "--duration", "300",
         "--processes", "1", "--threads", "1", "--tasks", "1", "--progress-every", "0.2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
    )  # fmt: skip
    try:
        assert proc.stderr is not None
        lines = [proc.stderr.readline()]  # a notice ("new ledger: created ...") first
        while lines[-1] and " ops (" not in lines[-1] and len(lines) < 20:
            lines.append(proc.stderr.readline())
        assert " ops (" in lines[-1], lines  # the first progress line: the campaign runs
        os.kill(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=WAIT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(WAIT)
    assert proc.returncode == 130, err
    assert "operations" in out, (out, err)
    assert "double wins       0" in out, out
    assert "interrupted" in out


def test_a_store_gone_before_the_final_read_is_exit_3_with_a_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing proven is never a pass: every id stays unread, said in the summary."""
    from tests.torture import factories

    from .conftest import campaign

    closed = tmp_path / "closed"
    monkeypatch.setenv(factories.SQLITE_ENV, str(tmp_path / "l.db"))
    monkeypatch.setenv(factories.CLOSED_ENV, str(closed))
    result, text = campaign(
        factory="tests.torture.factories:closes_later",
        restart=closed.touch,  # "restarts" the store into one that refuses opens
        restarts=1,
        duration=2.0,
        processes=1,
    )
    assert result.code == 3, text
    assert result.totals.restarts == 2, text  # scheduled + before the final read
    assert "the final read could not open the ledger" in text
    assert result.verdict.final_unverified > 0, text
    assert "double wins       0" in text
