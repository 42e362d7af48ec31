"""docs/hosts.md's snippets run as written, given only the names they say are the host's
(a model, a ledger, the answers, a secret), and import nothing they do not use."""

from __future__ import annotations

import ast
import asyncio
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage
from pydantic_ai.models.function import FunctionModel

from ledger_core import AsyncMemoryLedger, MemoryLedger, new_attempt_secret
from ledger_core.protocol import close_ledger
from tests.hosts import oa_app, pa_app

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "hosts.md"


def block(heading: str) -> str:
    """The first python block after ``heading`` in docs/hosts.md."""
    text = DOC.read_text()
    found = re.search(r"```python\n(.*?)```", text[text.index(heading) :], re.S)
    assert found is not None, heading
    return found.group(1)


SNIPPETS = {  # heading -> the names the snippet leaves to the host
    "## Accepted answers": ["graph", "config"],
    "## LangGraph": [],
    "## PydanticAI": ["model", "ledger", "answers", "secret"],
    "## OpenAI Agents SDK": ["agent", "ledger", "answers", "secret"],
}


@pytest.mark.parametrize("heading", list(SNIPPETS))
def test_a_snippet_defines_every_name_and_uses_every_import(heading: str, tmp_path: Path) -> None:
    source = tmp_path / "snippet.py"
    source.write_text(block(heading))
    builtins = ", ".join(f'"{name}"' for name in SNIPPETS[heading])
    lint = ["--select", "F401,F811,F821", "--config", f"builtins = [{builtins}]"]
    checked = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "--isolated", *lint, str(source)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout


def run(heading: str, names: dict[str, Any]) -> dict[str, Any]:
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT  # and not this module's __future__ imports
    code = compile(block(heading), heading, "exec", flags=flags, dont_inherit=True)
    result = eval(code, names)  # a coroutine when the snippet awaits at top level
    if asyncio.iscoroutine(result):
        asyncio.run(result)
    return names


def test_the_langgraph_snippets_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the snippet opens sqlite:///decisions.db
    names = run("## LangGraph", {})
    try:
        assert names["asked"][0].value["question"] == "Send 100?"
        assert names["done"]["result"] == "sent 100"
        graph = names["graph"]
        config = {"configurable": {"thread_id": "t-2"}}
        call = AIMessage("", tool_calls=[{"name": "transfer", "args": {}, "id": "call-2"}])
        graph.invoke({"messages": [call]}, config)
        answered = run("## Accepted answers", {"graph": graph, "config": config})
        assert "nothing was spent" in answered["out"]["__interrupt__"][0].value["invalid_answer"]
        assert graph.get_state(config).values["result"] == "sent 100"
    finally:
        close_ledger(names["ledger"])


def test_the_pydantic_ai_snippet_runs(tmp_path: Path) -> None:
    model = FunctionModel(pa_app._model)
    names = run(
        "## PydanticAI",
        {
            "model": model,
            "ledger": MemoryLedger(),
            "answers": {"call-1": True},
            "secret": new_attempt_secret(),
        },
    )
    assert names["results"].decisions["call-1"].run


def test_the_agents_sdk_snippet_runs(tmp_path: Path) -> None:
    names = run(
        "## OpenAI Agents SDK",
        {
            "agent": oa_app.make_agent(tmp_path / "tool.log"),
            "ledger": AsyncMemoryLedger(),
            "answers": {"call-1": True},
            "secret": new_attempt_secret(),
        },
    )
    assert names["result"].final_output == "tool said: sent"
