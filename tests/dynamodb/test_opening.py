"""Opening is explicit (issue 37): see :mod:`tests.opening`. On dynalite alone: the
refusal and the log are the decisions' (the emulators differ in none of it)."""

from __future__ import annotations

import pytest

from tests.dynamodb import tools
from tests.opening import missing_namespace_refused_then_created_once
from tests.servers import dynamodb as servers

dynamodb_target = tools.on_emulators(servers.DYNALITE)


@pytest.mark.parametrize("flavor", ["sync", "async"])
def test_a_missing_namespace_is_refused_and_a_created_one_logged(
    flavor: str, dynamodb_url: str, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    missing_namespace_refused_then_created_once(flavor, dynamodb_url, namespace, caplog)
