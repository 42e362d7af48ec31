"""Every agent host on every backend with a server here (issue 14): the same approval
resumed by two racing processes runs the tool once; the winner re-enters after a crash
between spend and tool while the other is refused; a close proves never-ran.

SQLite runs the full per-framework suites (``test_langgraph.py``...); this module runs
the races on Redis, PostgreSQL, MongoDB and DynamoDB, through ``open_ledger`` URLs, with
native ``spend_as`` where the backend has it and ``MarkerReentry`` otherwise."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command

from ledger_core import CloseVerdict, new_attempt_secret, open_async_ledger, open_ledger
from ledger_langgraph import close_thread
from ledger_openai_agents import aclose_interruptions
from ledger_pydantic_ai import close_requests
from tests.hosts import lg_app, oa_app, pa_app
from tests.hosts.common import ALREADY, CRASH_EXIT, in_processes, lines
from tests.hosts.stores import KINDS, store
from tests.servers.common import serve_or_skip

CLOSED = "Not run: the host closed this approval after it timed out."
FRAMEWORKS = ["langgraph", "pydantic-ai", "openai-agents"]
SENT = {"langgraph": "sent", "pydantic-ai": "tool said: sent", "openai-agents": "tool said: sent"}
RESUMERS: dict[str, Callable[[str, str, bool], str]] = {
    "langgraph": lg_app.resume_in_process,
    "pydantic-ai": pa_app.resume_in_process,
    "openai-agents": oa_app.resume_in_process,
}


@pytest.fixture(scope="module", params=KINDS)
def fresh_url(request: pytest.FixtureRequest) -> Iterator[Callable[[], str]]:
    """One server per backend for the module; each call: a new, empty namespace."""
    yield from serve_or_skip(lambda: store(request.param))


def _paused(framework: str, root: Path, url: str) -> dict[str, Any]:
    """The first run in this process: the approval is minted and the person asked."""
    (root / "ledger.url").write_text(url)
    if framework == "openai-agents":

        async def go() -> None:
            ledger: Any = await open_async_ledger(url)
            try:
                await oa_app.pause(root, ledger)
            finally:
                await ledger.aclose()

        asyncio.run(go())
        return dict(json.loads((root / "run.json").read_text()))
    ledger: Any = open_ledger(url)
    try:
        if framework == "pydantic-ai":
            return pa_app.pause(root, ledger)
        with SqliteSaver.from_conn_string(str(root / "checkpoints.db")) as saver:
            out = lg_app.build(ledger, saver, root / "tool.log").invoke(
                {"amount": 100}, lg_app.config()
            )
        assert lg_app.outcome(out) == "interrupted"
        return {}
    finally:
        ledger.close()


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_racing_resumers_run_once_and_only_the_winner_reenters(
    fresh_url: Callable[[], str], framework: str, tmp_path: Path
) -> None:
    """Two processes race; the one holding ``winner`` crashes in the tool if it wins.
    Whoever won, the tool completes exactly once, by the winning attempt only."""
    _paused(framework, tmp_path, fresh_url())
    resume, sent, root = RESUMERS[framework], SENT[framework], str(tmp_path)
    winner, other = new_attempt_secret(), new_attempt_secret()
    results, codes = in_processes(resume, [(root, winner, True), (root, other, False)])
    crashed = CRASH_EXIT in codes
    if crashed:  # the crashing attempt won: the other was refused, the tool started once
        assert (sorted(codes, key=str), results) == ([0, CRASH_EXIT], [ALREADY])
        assert lines(tmp_path / "tool.log") == ["start"]
    else:  # the other attempt won and finished; the crashing one was refused (or, on
        # LangGraph, found the graph already finished and answered with its final state)
        assert codes == [0, 0]
        assert sent in results
        assert set(results) <= {sent, ALREADY}, results
        assert lines(tmp_path / "tool.log") == ["start", "done"]
    # A fresh attempt is refused; then the crashed winner's attempt re-enters and
    # completes. (One after the other: a graph that finished answers any later resume
    # with its final state, without running anything.)
    fresh, _ = in_processes(resume, [(root, new_attempt_secret(), False)])
    retry, _ = in_processes(resume, [(root, winner, False)])
    if crashed:
        assert (fresh, retry) == ([ALREADY], [sent])
        assert lines(tmp_path / "tool.log") == ["start", "start", "done"]
    else:  # the losing attempt stays refused (or sees the finished run): nothing runs
        assert lines(tmp_path / "tool.log") == ["start", "done"]


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_close_proves_never_ran_and_a_late_answer_is_refused(
    fresh_url: Callable[[], str], framework: str, tmp_path: Path
) -> None:
    url = fresh_url()
    saved = _paused(framework, tmp_path, url)
    if framework == "openai-agents":

        async def go() -> str:
            ledger: Any = await open_async_ledger(url)
            try:
                closures = await aclose_interruptions(ledger, saved["ledger"])
                assert closures["call-1"].verdict is CloseVerdict.CLOSED_PROVEN
                return await oa_app.resume(tmp_path, ledger, new_attempt_secret())
            finally:
                await ledger.aclose()

        late = asyncio.run(go())
    else:
        ledger: Any = open_ledger(url)
        try:
            if framework == "pydantic-ai":
                closures = close_requests(ledger, saved["ledger"])
                assert closures["call-1"].verdict is CloseVerdict.CLOSED_PROVEN
                late = pa_app.resume(tmp_path, ledger, new_attempt_secret())
            else:
                with SqliteSaver.from_conn_string(str(tmp_path / "checkpoints.db")) as saver:
                    graph = lg_app.build(ledger, saver, tmp_path / "tool.log")
                    closure = close_thread(ledger, graph, lg_app.config())
                    assert closure.verdict is CloseVerdict.CLOSED_PROVEN
                    out = graph.invoke(Command(resume=True), lg_app.config(new_attempt_secret()))
                    late = lg_app.outcome(out)
        finally:
            ledger.close()
    assert CLOSED in late
    assert lines(tmp_path / "tool.log") == []
