"""Opening is explicit (issue 37): see :mod:`tests.opening`."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.opening import missing_namespace_refused_then_created_once


@pytest.mark.parametrize("flavor", ["sync", "async"])
def test_a_missing_namespace_is_refused_and_a_created_one_logged(
    flavor: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"sqlite:///{tmp_path}/ledger.db"
    missing_namespace_refused_then_created_once(flavor, url, "prod typo", caplog)
