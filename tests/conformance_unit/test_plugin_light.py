"""The suite's pytest plugin is loaded by every pytest run where the suite is installed, so
it must cost nothing there (issue 9): no core, no backend, no driver, no hypothesis, none
of the suite's machinery, until a ledger test runs."""

from __future__ import annotations

import json
from pathlib import Path

from .runs import run_pytest

HEAVY_ROOTS = {
    "hypothesis",
    "ledger_core",
    "ledger_sqlite",
    "ledger_redis",
    "ledger_postgres",
    "ledger_mongodb",
    "ledger_dynamodb",
    "redis",
    "psycopg",
    "psycopg_pool",
    "pymongo",
    "boto3",
    "botocore",
    "aiobotocore",
}
SUITE_MACHINERY = {
    "ledger_conformance.harness",
    "ledger_conformance.history",
    "ledger_conformance.faults",
    "ledger_conformance.urlmode",
    "ledger_conformance.report",
    "ledger_conformance.runner",
    "ledger_conformance.suite",
    "ledger_conformance.clauses",
}

UNRELATED_TEST = """
import json
import sys


def test_unrelated(pytestconfig):
    plugins = [p for p in pytestconfig.pluginmanager.list_name_plugin() if p[0]]
    with open("modules.json", "w") as out:
        json.dump({"modules": sorted(sys.modules), "plugins": [n for n, _ in plugins]}, out)
"""


def test_loading_the_plugin_imports_nothing_heavy(tmp_path: Path) -> None:
    (tmp_path / "test_unrelated.py").write_text(UNRELATED_TEST)
    done = run_pytest("-q", "test_unrelated.py", cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    seen = json.loads((tmp_path / "modules.json").read_text())
    modules = set(seen["modules"])
    assert "ledger_conformance.plugin" in modules, "the plugin was not loaded at all"
    assert any("ledger_conformance" in name for name in seen["plugins"]), seen["plugins"]
    heavy = sorted(m for m in modules if m.split(".")[0] in HEAVY_ROOTS)
    machinery = sorted(m for m in modules if any(m.startswith(s) for s in SUITE_MACHINERY))
    assert not heavy, f"an unrelated pytest run imported {heavy}"
    assert not machinery, f"an unrelated pytest run imported the suite's {machinery}"
    assert "decision-ledger conformance" not in done.stdout  # no table without clause tests
