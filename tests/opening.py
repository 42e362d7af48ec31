"""Opening is explicit on every backend (issue 37), asserted once for all of them: a
namespace without its genesis is a missing store under ``create=false`` (refused,
naming ``setup --namespace``, and nothing created: a second open refuses too), and an
open with ``create=true`` that makes it logs so once."""

from __future__ import annotations

import re
import shlex
from typing import Any

import pytest

from ledger_core.errors import LedgerUnavailable
from tests.flavors import Flavored


def missing_namespace_refused_then_created_once(
    flavor: str, url: str, namespace: str, caplog: pytest.LogCaptureFixture, **options: Any
) -> None:
    Flavored(flavor, url, **options).dispose()  # the store itself exists
    setup = re.escape(f"--namespace {shlex.quote(namespace)}")
    for create in (False, "false"):  # the second open finds nothing the first made
        with pytest.raises(LedgerUnavailable, match=setup):
            Flavored(flavor, url, namespace=namespace, create=create, **options)
    caplog.clear()
    for _ in range(2):
        Flavored(flavor, url, namespace=namespace, **options).dispose()
    said = [r.getMessage() for r in caplog.records if r.name == "decision_ledger"]
    created = [m for m in said if "new ledger: created an empty store" in m]
    assert len(created) == 1, said
    assert f"(namespace {namespace!r})" in created[0]
    Flavored(flavor, url, namespace=namespace, create=False, **options).dispose()
