"""Opening is explicit (issue 37): see :mod:`tests.opening`."""

from __future__ import annotations

import pytest

from tests.opening import missing_namespace_refused_then_created_once


@pytest.mark.parametrize("flavor", ["sync", "async"])
def test_a_missing_namespace_is_refused_and_a_created_one_logged(
    flavor: str, redis_url: str, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    missing_namespace_refused_then_created_once(flavor, redis_url, namespace, caplog)
