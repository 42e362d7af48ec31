"""The README's agent-host examples run as written (offline: no LLM, no API key)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ledger_langgraph import PAST_THE_PAUSE
from tests.hosts import common

ROOT = Path(__file__).resolve().parents[2]

REFUSED = f"second resume refused: {common.REFUSED}"


@pytest.mark.parametrize(
    ("script", "ran", "refused"),
    [
        (
            "langgraph_approval.py",
            "first resume: sent 100",
            f"second resume refused: {PAST_THE_PAUSE}",
        ),
        ("pydantic_ai_approval.py", "first resume: done: sent 100", REFUSED),
        ("openai_agents_approval.py", "first resume: sent 100", REFUSED),
        ("google_adk_approval.py", "first resume: sent 100", REFUSED),
        ("agent_framework_approval.py", "first resume: sent 100", REFUSED),
    ],
)
def test_example_runs_the_tool_once(script: str, ran: str, refused: str, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / script), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[1:] == [ran, refused]
    assert (tmp_path / "decisions.db").exists()
