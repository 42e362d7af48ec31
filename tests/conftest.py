"""Strict mode: in CI every backend must really run, so a skip is a failure."""

from __future__ import annotations

import pytest

from tests.servers.common import strict

# The conformance suite's own verdicts ("not exercised: no fault proxy in the path", "not
# applicable: store_id is None") are results shown in its report, not missing servers.
_VERDICTS = ("Skipped: not exercised:", "Skipped: not applicable:")


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
