"""``--ledger-call-bound`` (``check --call-bound``) is C4's bound on one call under a fault:
a URL whose ``timeout`` is longer than the 10 s default would otherwise fail C4 for keeping
the timeout it was given."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

TEST = """
from ledger_conformance.clauses.c4_bounded import C4Bounded


class TestBound(C4Bounded):
    test_C4_bounded_calls = None  # only the fixture is under test
    test_C4_calls_after_close = None

    def test_bound(self, ledger_call_bound, request):
        assert ledger_call_bound == float(request.config.getoption("expected"))
"""
CONFTEST = 'def pytest_addoption(parser):\n    parser.addoption("--expected")\n'


def _run(tmp_path: Path, *options: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_bound.py").write_text(TEST)
    command = [sys.executable, "-m", "pytest", str(tmp_path), "-q", "-p", "no:cacheprovider"]
    return subprocess.run(
        [*command, "-o", "addopts=", *options],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_bound_is_ten_seconds_unless_given(tmp_path: Path) -> None:
    done = _run(tmp_path, "--expected", "10")
    assert done.returncode == 0, done.stdout + done.stderr
    done = _run(tmp_path, "--expected", "62", "--ledger-call-bound", "62")
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_bound_that_is_not_positive_is_refused(tmp_path: Path) -> None:
    done = _run(tmp_path, "--expected", "0", "--ledger-call-bound", "0")
    assert done.returncode == 4, done.stdout + done.stderr  # pytest's usage error
    assert "--ledger-call-bound" in done.stderr
