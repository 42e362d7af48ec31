"""Strict mode: in CI every backend must really run, so a skip is a failure."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger_sqlite.identity import VOLATILE_FILESYSTEMS, filesystem_of
from tests.servers.common import strict

# The conformance suite's own verdicts ("not exercised: no fault proxy in the path", "not
# applicable: store_id is None") are results shown in its report, not missing servers.
_VERDICTS = ("Skipped: not exercised:", "Skipped: not applicable:")


def pytest_configure(config: pytest.Config) -> None:
    """Keep test files on a disk: a SQLite ledger on tmpfs (Debian 13's /tmp) never proves."""
    if (
        config.option.basetemp is None
        and filesystem_of(os.path.join(tempfile.gettempdir(), "x")) in VOLATILE_FILESYSTEMS
    ):
        parent = config.rootpath / ".pytest-tmp"
        parent.mkdir(exist_ok=True)
        config.option.basetemp = str(parent / f"run-{os.getpid()}")


@pytest.fixture
def tmpfs_dir() -> Iterator[Path]:
    """A directory on tmpfs (Linux's /dev/shm): a SQLite ledger there never proves."""
    path = Path(tempfile.mkdtemp(dir="/dev/shm"))
    yield path
    shutil.rmtree(path)


def _suite_verdict(report: pytest.TestReport) -> bool:
    longrepr = report.longrepr
    return isinstance(longrepr, tuple) and str(longrepr[2]).startswith(_VERDICTS)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None or not strict():
        return
    skipped = [r for r in reporter.stats.get("skipped", []) if not _suite_verdict(r)]
    if skipped:
        reporter.write_line(
            f"strict mode (CI=true or LEDGER_STRICT=1): {len(skipped)} skip(s) fail the run",
            red=True,
        )
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
