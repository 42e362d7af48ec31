"""Strict mode: in CI every backend must really run, so a skip is a failure."""

from __future__ import annotations

import pytest

from tests.servers.common import strict


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None or not strict():
        return
    skipped = reporter.stats.get("skipped", [])
    if skipped:
        reporter.write_line(
            f"strict mode (CI=true or LEDGER_STRICT=1): {len(skipped)} skip(s) fail the run",
            red=True,
        )
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
