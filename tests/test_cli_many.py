"""``spend-many`` / ``is-spent-many``: many ids in one process, through the batch call,
each id answered on its own line, and nothing guessed when a call fails.

Before: one process per id (about 0.2 s each: hours for 100,000 ids).
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from ledger_core import LedgerUnavailable
from ledger_core.cli import _Meter, main
from ledger_sqlite import SQLiteLedger

Capture = pytest.CaptureFixture[str]


@pytest.fixture
def url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path}/l.db"
    assert main(["setup", url]) == 0
    return url


def test_ids_come_from_stdin_by_default(
    url: str, capsys: Capture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"s1\ns2\n")))
    assert main(["spend-many", url]) == 0
    assert capsys.readouterr().out.splitlines() == ["spent\ts1", "spent\ts2"]
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"s1\n")))
    assert main(["is-spent-many", url, "-"]) == 0


def test_each_id_gets_its_line_and_the_exit_code_says_all_or_some(
    url: str, tmp_path: Path, capsys: Capture
) -> None:
    ids = tmp_path / "ids.txt"
    ids.write_text("a\nb\na\n\nc\r\n")  # a repeat, a blank line, a CRLF line end
    assert main(["spend-many", url, str(ids)]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines() == ["spent\ta", "spent\tb", "spent\tc"]
    assert "spent here 3, already spent 0, failed 0 (1 repeated lines answered once)" in err
    ids.write_text("c\nd\n")
    assert main(["spend-many", url, str(ids)]) == 1  # some already spent
    assert capsys.readouterr().out.splitlines() == ["already-spent\tc", "spent\td"]
    ids.write_text("a\nd\n")
    assert main(["is-spent-many", url, str(ids)]) == 0
    ids.write_text("a\nnever\n")
    assert main(["is-spent-many", url, str(ids)]) == 1
    out, err = capsys.readouterr()
    assert out.splitlines()[-2:] == ["spent\ta", "not-spent\tnever"]
    assert "spent 1, not spent 1, failed 0" in err


def test_json_lines_carry_any_id_and_echo_it_as_read(
    url: str, tmp_path: Path, capsys: Capture
) -> None:
    odd = ["tab\there", "new\nline", " edge ", "ünï", '"quoted"']
    ids = tmp_path / "ids.jsonl"
    ids.write_text("".join(json.dumps(i) + "\n" for i in odd) + "\n")
    assert main(["spend-many", url, str(ids), "--json"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split("\t", 1)[0] for line in lines] == ["spent"] * len(odd)
    assert [json.loads(line.split("\t", 1)[1]) for line in lines] == odd
    ledger = SQLiteLedger(tmp_path / "l.db")
    assert all(ledger.is_spent(i) for i in odd)


@pytest.mark.parametrize(
    ("text", "flags", "said"),
    [
        ("ok\n" + "x" * 1025 + "\n", [], "line 2: request id is 1025 UTF-8 bytes"),
        ('"ok"\nbare\n', ["--json"], "line 2: not one JSON string"),
        ('"ok"\n["a"]\n', ["--json"], "line 2: not one JSON string"),
        ('"\\ud800"\n', ["--json"], "line 1: request id is not valid Unicode"),
    ],
)
def test_a_bad_line_is_exit_2_before_the_store_is_opened(
    tmp_path: Path, capsys: Capture, text: str, flags: list[str], said: str
) -> None:
    ids = tmp_path / "ids.txt"
    ids.write_text(text)
    missing = f"sqlite:///{tmp_path}/missing.db"  # opened, it would be exit 3
    assert main(["spend-many", missing, str(ids), *flags]) == 2
    assert said in capsys.readouterr().err
    assert not (tmp_path / "missing.db").exists()


def test_input_that_is_not_utf8_or_not_there_is_exit_2(
    url: str, tmp_path: Path, capsys: Capture
) -> None:
    ids = tmp_path / "ids.txt"
    ids.write_bytes(b"ok\n\xff\n")
    assert main(["spend-many", url, str(ids)]) == 2
    assert "not UTF-8 (byte 3)" in capsys.readouterr().err
    assert main(["spend-many", url, str(tmp_path / "none.txt")]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_the_batch_call_is_used_with_progress_on_stderr(
    url: str, tmp_path: Path, capsys: Capture, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    real = SQLiteLedger.spend_many

    def counted(self: SQLiteLedger, ids: list[str]) -> list[bool]:
        calls.append(len(ids))
        return real(self, ids)

    monkeypatch.setattr(SQLiteLedger, "spend_many", counted)
    monkeypatch.setattr(_Meter, "EVERY", 0.0)  # a line per batch
    ids = tmp_path / "ids.txt"
    ids.write_text("".join(f"id-{n}\n" for n in range(2500)))
    assert main(["spend-many", url, str(ids)]) == 0
    assert calls == [1000, 1000, 500]
    err = capsys.readouterr().err
    assert "1,000 of 2,500 ids (1,000 spent here)" in err
    assert "spent here 2,500, already spent 0, failed 0" in err


def test_a_failed_batch_is_failed_and_the_rest_not_tried(
    url: str, tmp_path: Path, capsys: Capture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Never "not spent": a batch whose call raised may have landed in part."""
    real = SQLiteLedger.spend_many
    batches = 0

    def second_fails(self: SQLiteLedger, ids: list[str]) -> list[bool]:
        nonlocal batches
        batches += 1
        if batches == 2:
            raise LedgerUnavailable("the server went away")
        return real(self, ids)

    monkeypatch.setattr(SQLiteLedger, "spend_many", second_fails)
    ids = tmp_path / "ids.txt"
    ids.write_text("".join(f"id-{n}\n" for n in range(2500)))
    assert main(["spend-many", url, str(ids)]) == 3
    out, err = capsys.readouterr()
    results = [line.split("\t")[0] for line in out.splitlines()]
    assert results == ["spent"] * 1000 + ["failed"] * 1000 + ["not-tried"] * 500
    assert "failed 1,000 (outcome unknown: each may be spent), not tried 500" in err
    assert "LedgerUnavailable: the server went away" in err


def test_without_a_batch_call_each_id_answered_before_a_failure_keeps_its_answer(
    capsys: Capture, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ledger_core.memory import MemoryLedger

    url = "memory://bulk-one-by-one"
    real = MemoryLedger._spend

    def third_fails(self: MemoryLedger, request_id: bytes) -> bool:
        if request_id == b"c":
            raise LedgerUnavailable("gone")
        return real(self, request_id)

    monkeypatch.setattr(MemoryLedger, "_spend", third_fails)
    ids = tmp_path / "ids.txt"
    ids.write_text("a\nb\nc\nd\n")
    assert main(["spend-many", url, str(ids)]) == 3
    out = capsys.readouterr().out.splitlines()
    assert out == ["spent\ta", "spent\tb", "failed\tc", "not-tried\td"]


def test_an_answer_that_is_not_bools_is_exit_4(
    url: str, tmp_path: Path, capsys: Capture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(SQLiteLedger, "is_spent_many", lambda self, ids: [True])
    ids = tmp_path / "ids.txt"
    ids.write_text("a\nb\n")
    assert main(["is-spent-many", url, str(ids)]) == 4
    out, err = capsys.readouterr()
    assert out.splitlines() == ["failed\ta", "failed\tb"]
    assert "the answer is unknown" in err


def test_ctrl_c_says_what_is_known_and_exits_130(
    url: str, tmp_path: Path, capsys: Capture, monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(self: SQLiteLedger, ids: list[str]) -> list[bool]:
        raise KeyboardInterrupt

    monkeypatch.setattr(SQLiteLedger, "spend_many", interrupted)
    ids = tmp_path / "ids.txt"
    ids.write_text("a\n")
    assert main(["spend-many", url, str(ids)]) == 130
    out, err = capsys.readouterr()
    assert out.splitlines() == ["failed\ta"]
    assert "interrupted" in err
