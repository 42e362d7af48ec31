"""Issue 8 items 6 and 7: the CLI exits 1 only for an answer it got, and never creates a
store it was asked to read.

Before: a crash inside a ledger printed a traceback and exited 1 ("not spent"); a ledger
answering ``1`` or ``None`` read as an answer; a broken entry point printed a traceback;
``is-spent`` on a mistyped SQLite path printed "not spent" and created the file, and
``migrate`` from a typo copied 0 ids and exited 0.
"""

from __future__ import annotations

import importlib.metadata
from pathlib import Path
from typing import Any

import pytest

from ledger_core import LedgerError, memory, register_backend, registry
from ledger_core.cli import main
from ledger_core.opening import OpenRequest

INTERNAL = 4  # "internal error: the answer is unknown"

SECRET = "pw-Secr3tive"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out.strip(), err.strip()


class _Answers:
    """A third-party ledger (no base class) that answers whatever it is told to."""

    def __init__(self, spend: Any, is_spent: Any) -> None:
        self._spend, self._is_spent = spend, is_spent

    def _give(self, value: Any) -> Any:
        if isinstance(value, BaseException):
            raise value
        return value

    def spend(self, request_id: str) -> Any:
        return self._give(self._spend)

    def is_spent(self, request_id: str) -> Any:
        return self._give(self._is_spent)


class _ThirdParty:
    def __init__(self, ledger: Any = None, open_error: BaseException | None = None) -> None:
        self.ledger, self.open_error = ledger, open_error

    def open(self, request: OpenRequest) -> Any:
        if self.open_error is not None:
            raise self.open_error
        return self.ledger

    async def open_async(self, request: OpenRequest) -> Any:
        raise NotImplementedError


@pytest.mark.parametrize(
    ("answer", "command"),
    [
        (RuntimeError(f"driver blew up for app:{SECRET}"), "is-spent"),
        (RuntimeError("driver blew up"), "spend"),
        (KeyError("x"), "is-spent"),
        (1, "spend"),  # truthy, not True
        (None, "is-spent"),  # falsy, not False
        (0, "is-spent"),
        ("spent", "spend"),
    ],
)
def test_anything_but_an_answer_is_exit_4_on_one_line(
    capsys: pytest.CaptureFixture[str], answer: Any, command: str
) -> None:
    register_backend("thirdparty-raw", _ThirdParty(_Answers(answer, answer)))
    code, out, err = run(capsys, command, f"thirdparty-raw://app:{SECRET}@h/x", "req")
    assert code == INTERNAL
    assert out == ""
    assert err.startswith(f"decision-ledger {command}: internal error, the answer is unknown")
    assert len(err.splitlines()) == 1
    assert "Traceback" not in err
    assert SECRET not in err


def test_debug_shows_the_traceback_without_secrets(capsys: pytest.CaptureFixture[str]) -> None:
    register_backend("thirdparty-raw", _ThirdParty(_Answers(RuntimeError(SECRET), False)))
    code, _, err = run(capsys, "--debug", "spend", f"thirdparty-raw://u:{SECRET}@h/x", "req")
    assert code == 4
    assert "Traceback" in err
    assert SECRET not in err
    code, _, err = run(capsys, "is-spent", "--debug", "thirdparty-raw://h/x", "req")
    assert (code, "Traceback" in err) == (1, False)  # an answer: no traceback to show


def test_a_ledger_error_that_is_not_an_answer_is_never_exit_1(
    capsys: pytest.CaptureFixture[str],
) -> None:
    register_backend("thirdparty-err", _ThirdParty(_Answers(LedgerError("x"), LedgerError("y"))))
    for command in ("spend", "is-spent"):
        code, out, err = run(capsys, command, "thirdparty-err://h/x", "req")
        assert (code, out) == (3, "")
        assert "LedgerError" in err


def test_a_raw_exception_while_opening_is_a_ledger_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    failing = _ThirdParty(open_error=UnicodeError(f"encoding with 'idna' failed: {SECRET}"))
    register_backend("thirdparty-open", failing)
    code, _, err = run(capsys, "is-spent", f"thirdparty-open://u:{SECRET}@bad..host/x", "r1")
    assert code == 3
    assert "LedgerUnavailable" in err
    assert "UnicodeError" in err
    assert SECRET not in err
    with pytest.raises(LedgerError) as caught:
        registry.open_ledger(f"thirdparty-open://u:{SECRET}@bad..host/x")
    assert isinstance(caught.value.__cause__, UnicodeError)
    assert SECRET not in str(caught.value.__cause__)
    assert caught.value.__context__ is None


def test_postgres_url_with_a_bad_host_is_not_an_answer(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The issue's reproduction: a traceback and exit 1 ("not spent")."""
    pytest.importorskip("psycopg")
    code, out, err = run(capsys, "is-spent", "postgresql://u@bad..host:5/db", "r1")
    assert code not in (0, 1)
    assert out == ""
    assert len(err.splitlines()) == 1
    assert "Traceback" not in err


@pytest.fixture
def broken_entry_point(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.metadata.entry_points
    broken = importlib.metadata.EntryPoint(
        name="brokenscheme", value="ledger_core.memory:NO_SUCH_BACKEND", group="x"
    )

    def with_broken(**kwargs: Any) -> Any:
        return [*real(**kwargs), broken]

    monkeypatch.setattr(registry, "entry_points", with_broken)


@pytest.mark.usefixtures("broken_entry_point")
@pytest.mark.parametrize(
    "argv", [("check", "brokenscheme://x"), ("spend", "brokenscheme://x", "a")]
)
def test_an_entry_point_that_fails_to_load_is_one_clear_line(
    capsys: pytest.CaptureFixture[str], argv: tuple[str, ...]
) -> None:
    pytest.importorskip("ledger_conformance.runner")
    code, _, err = run(capsys, *argv)
    assert code == 2
    assert "brokenscheme" in err
    assert "ledger_core.memory:NO_SUCH_BACKEND" in err
    assert "Traceback" not in err
    assert len(err.splitlines()) == 1


def test_entry_point_load_errors_are_ledger_errors() -> None:
    def explode() -> Any:
        raise ZeroDivisionError("at import time")

    with pytest.raises(LedgerError, match=r"x:// \(entry point x = pkg:obj\).*ZeroDivision"):
        registry._load("x", "x", "pkg:obj", explode)
    with pytest.raises(LedgerError, match="no open"):
        registry._load("x", "x", "pkg:obj", lambda: object())
    assert registry._load("x", "x", "pkg:obj", lambda: memory.BACKEND) is memory.BACKEND


# -- item 7: reads never create a store ------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ("is-spent", "{url}", "req-1"),
        ("store-id", "{url}"),
        ("spend", "{url}", "req-1"),
        ("migrate", "{url}", "sqlite:///{tmp}/target.db"),
    ],
)
def test_a_mistyped_sqlite_path_is_missing_not_new(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: tuple[str, ...]
) -> None:
    typo = tmp_path / "typo.db"
    url = f"sqlite:///{typo}"
    code, out, err = run(capsys, *(a.format(url=url, tmp=tmp_path) for a in argv))
    assert (code, out) == (3, "")
    assert "LedgerUnavailable" in err
    assert "decision-ledger setup" in err
    assert not typo.exists()
    assert not (tmp_path / "target.db").exists()


def test_setup_creates_then_every_command_works(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path}/l.db"
    assert run(capsys, "setup", url)[0] == 0
    assert run(capsys, "spend", url, "a")[:2] == (0, "spent")
    assert run(capsys, "is-spent", url, "a")[:2] == (0, "spent")
    # The keyword wins over the URL: a read never creates, whatever the URL says.
    missing = f"sqlite:///{tmp_path}/other.db?create=true"
    assert run(capsys, "is-spent", missing, "a")[0] == 3
    assert not (tmp_path / "other.db").exists()
