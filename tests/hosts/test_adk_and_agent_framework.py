"""Google ADK tool confirmations and Microsoft Agent Framework function approvals on a
SQLite ledger, no LLM (a scripted model): the same approval resumed by racing processes
runs the tool once, a crashed winner re-enters, a close proves never-ran, a store switch
asks again with a reason, and every answer that is not one of the accepted forms is
refused before anything is spent."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

import pytest
from agent_framework import Content, Message
from google.adk.tools.tool_confirmation import ToolConfirmation

from ledger_agent_framework import responses_for
from ledger_agents import ApprovalNotRecorded, InvalidAnswer, NotThisResume
from ledger_core import CloseVerdict, new_attempt_secret, store_id_of
from ledger_google_adk import NoGoAhead, confirmations_for, mint_confirmations
from ledger_sqlite import AsyncSQLiteLedger, SQLiteLedger
from tests.hosts import adk_app, af_app, resumer
from tests.hosts.common import ALREADY, CRASH_EXIT, in_processes, in_rounds, lines
from tests.hosts.resumer import resume
from tests.scripted import AsyncScripted, Scripted, raises

APPS = [pytest.param(adk_app, id="google-adk"), pytest.param(af_app, id="agent-framework")]
SENT = "tool said: sent"
CLOSED = "Not run: the host closed this approval after it timed out."
RACES = 20
T = TypeVar("T")


def _with_ledger(root: Path, body: Callable[[AsyncSQLiteLedger], Awaitable[T]]) -> T:
    async def go() -> T:
        ledger = await AsyncSQLiteLedger.open(root / "ledger.db")
        try:
            return await body(ledger)
        finally:
            await ledger.aclose()

    return asyncio.run(go())


def _racer(app: ModuleType) -> Callable[[str, str, bool], str]:
    """The app's resume in a spawned process (a picklable callable)."""
    return partial(resumer.app_in_process, app.__name__)


def paused(app: Any, root: Path) -> dict[str, Any]:
    """The first run in this process: the approval is minted and the person asked."""
    saved: dict[str, Any] = _with_ledger(root, lambda ledger: app.pause(root, ledger))
    (request_id,) = saved["ledger"]
    assert saved["ledger"][request_id]["request_id"] == app.PREFIX + request_id
    return saved


@pytest.mark.parametrize("app", APPS)
def test_twenty_two_process_races_each_run_the_tool_once(app: ModuleType, tmp_path: Path) -> None:
    roots = [tmp_path / f"race-{n}" for n in range(RACES)]
    for root in roots:
        root.mkdir()
        paused(app, root)
    rounds = [[(str(root), new_attempt_secret(), False) for _ in range(2)] for root in roots]
    results, codes = in_rounds(_racer(app), rounds)
    assert codes == [0, 0]
    assert results == sorted([ALREADY, SENT] * RACES)
    assert [lines(root / "tool.log") for root in roots] == [["start", "done"]] * RACES


@pytest.mark.parametrize("app", APPS)
def test_the_winner_reenters_after_a_crash_and_others_are_refused(
    app: ModuleType, tmp_path: Path
) -> None:
    paused(app, tmp_path)
    winner, other = new_attempt_secret(), new_attempt_secret()
    _, codes = in_processes(_racer(app), [(str(tmp_path), winner, True)])
    assert codes == [CRASH_EXIT]
    results, _ = in_processes(_racer(app), [(str(tmp_path), other, False)])
    assert results == [ALREADY]
    if app is adk_app:  # ADK saved the winner's confirmation: a bare run needs the go-ahead
        with pytest.raises(NoGoAhead, match="no decision ledger go-ahead in this process"):
            asyncio.run(adk_app.bare_run(tmp_path, guard=True))
        assert lines(tmp_path / "tool.log") == ["start"]
    results, _ = in_processes(_racer(app), [(str(tmp_path), winner, False)])
    assert results == [SENT]
    assert lines(tmp_path / "tool.log") == ["start", "start", "done"]


@pytest.mark.parametrize("app", APPS)
def test_a_store_switch_asks_again_with_a_reason_and_spends_nothing(
    app: ModuleType, tmp_path: Path
) -> None:
    saved = paused(app, tmp_path)
    (request_id,) = saved["ledger"]

    async def go(ledger: AsyncSQLiteLedger) -> None:
        moved = await AsyncSQLiteLedger.open(tmp_path / "other.db")
        try:
            outcome = await app.answer(moved, saved["ledger"], {request_id: True})
            assert outcome.message is None
            assert outcome.decisions == {}
            assert f"asked under store {store_id_of(ledger)!r}" in outcome.reason
            assert f"now store {store_id_of(moved)!r}" in outcome.reason
            assert outcome.ask_again[request_id]["store_id"] == store_id_of(moved)
            assert await moved.is_spent(app.PREFIX + request_id) is False
            assert await resume(app, tmp_path, moved, new_attempt_secret()) == "ask-again"
            assert lines(tmp_path / "tool.log") == []
            assert await resume(app, tmp_path, moved, new_attempt_secret()) == SENT
            assert await ledger.is_spent(app.PREFIX + request_id) is False
        finally:
            await moved.aclose()

    _with_ledger(tmp_path, go)
    assert lines(tmp_path / "tool.log") == ["start", "done"]


@pytest.mark.parametrize("app", APPS)
def test_a_close_proves_never_ran_and_a_late_answer_is_refused(
    app: ModuleType, tmp_path: Path
) -> None:
    saved = paused(app, tmp_path)
    (request_id,) = saved["ledger"]

    async def go(ledger: AsyncSQLiteLedger) -> None:
        closures = await app.close(ledger, saved["ledger"])
        assert closures[request_id].verdict is CloseVerdict.CLOSED_PROVEN
        outcome = await app.answer(ledger, saved["ledger"], {request_id: True})
        assert outcome.decisions[request_id].message == CLOSED
        assert await app.proceed(tmp_path, outcome.message) == app.REFUSED

    _with_ledger(tmp_path, go)
    assert lines(tmp_path / "tool.log") == []


@pytest.mark.parametrize("app", APPS)
def test_a_denial_is_spent_and_the_tool_never_runs(app: ModuleType, tmp_path: Path) -> None:
    saved = paused(app, tmp_path)
    (request_id,) = saved["ledger"]

    async def go(ledger: AsyncSQLiteLedger) -> None:
        secret = new_attempt_secret()
        assert await resume(app, tmp_path, ledger, secret, approve=False) == app.REFUSED
        assert await ledger.is_spent(app.PREFIX + request_id) is True
        with pytest.raises(NotThisResume):  # an approval after the denial: the same question
            await resume(app, tmp_path, ledger, new_attempt_secret())

    _with_ledger(tmp_path, go)
    assert lines(tmp_path / "tool.log") == []


BAD: list[object] = ["yes", "false", 1, 0, None, {"approved": True}, {"confirmed": True}, [True]]


@pytest.mark.parametrize("app", APPS)
def test_a_non_answer_is_refused_before_anything_is_spent_sync_ledger(
    app: ModuleType, tmp_path: Path
) -> None:
    saved = paused(app, tmp_path)
    (request_id,) = saved["ledger"]
    record = saved["ledger"][request_id]
    with SQLiteLedger(tmp_path / "ledger.db") as ledger:
        for answer in BAD:
            with pytest.raises(InvalidAnswer, match="nothing was spent"):
                app.answer_sync(ledger, saved["ledger"], {request_id: answer})
        with pytest.raises(InvalidAnswer, match="no answers given"):
            app.answer_sync(ledger, saved["ledger"], {})
        with pytest.raises(KeyError, match="never minted"):
            app.answer_sync(ledger, saved["ledger"], {"someone-else": True})
        assert ledger.is_spent(app.PREFIX + request_id) is False
        outcome = app.answer_sync(ledger, saved["ledger"], {request_id: app.own(record, True)})
        assert outcome.decisions[request_id].run
    assert asyncio.run(app.proceed(tmp_path, outcome.message)) == SENT
    assert lines(tmp_path / "tool.log") == ["start", "done"]


@pytest.mark.parametrize("app", APPS)
def test_the_frameworks_own_denial_is_spent_as_a_denial_async(
    app: ModuleType, tmp_path: Path
) -> None:
    saved = paused(app, tmp_path)
    (request_id,) = saved["ledger"]
    record = saved["ledger"][request_id]

    async def go(ledger: AsyncSQLiteLedger) -> str:
        for answer in BAD:
            with pytest.raises(InvalidAnswer, match="nothing was spent"):
                await app.answer(ledger, saved["ledger"], {request_id: answer})
        assert await ledger.is_spent(app.PREFIX + request_id) is False
        outcome = await app.answer(ledger, saved["ledger"], {request_id: app.own(record, False)})
        assert outcome.decisions[request_id].message == "The person denied this call."
        assert await ledger.is_spent(app.PREFIX + request_id) is True
        return str(await app.proceed(tmp_path, outcome.message))

    assert _with_ledger(tmp_path, go) == app.REFUSED
    assert lines(tmp_path / "tool.log") == []


def test_agent_framework_without_a_ledger_runs_the_same_approval_twice(tmp_path: Path) -> None:
    """The control group: the framework binds an approval to the session it is given, so
    two resumes of one saved session both run the tool (the ledger's races above run it
    once)."""
    saved = paused(af_app, tmp_path)
    (request_id,) = saved["ledger"]
    approval = af_app.own(saved["ledger"][request_id], True)
    for _ in range(2):
        assert asyncio.run(af_app.proceed(tmp_path, Message(role="user", contents=[approval])))
    assert lines(tmp_path / "tool.log") == ["start", "done"] * 2


def test_agent_framework_takes_a_list_of_its_own_responses_and_checks_their_ids(
    tmp_path: Path,
) -> None:
    saved = paused(af_app, tmp_path)
    (request_id,) = saved["ledger"]
    record = saved["ledger"][request_id]
    request = Content.from_dict(record["approval_request"])
    call: Any = request.function_call
    stranger = Content.from_function_approval_response(True, "af-other", call)
    yes: Any = "yes"  # what a UI might post
    said_yes = Content("function_approval_response", id=request_id, approved=yes)
    said_yes.function_call = call
    # The framework's own readers turn "yes" into a denial before the integration sees it
    # (docs/hosts.md); only a response built otherwise can be refused.
    assert Content.from_dict(said_yes.to_dict()).approved is False
    with SQLiteLedger(tmp_path / "ledger.db") as ledger:
        for answer in ({request_id: stranger}, {request_id: request}, [request], [said_yes]):
            with pytest.raises(InvalidAnswer, match="nothing was spent"):
                responses_for(ledger, saved["ledger"], answer)
        assert ledger.is_spent(af_app.PREFIX + request_id) is False
        outcome = responses_for(ledger, saved["ledger"], [af_app.own(record, True)])
    assert [r.approved for r in outcome.responses] == [True]
    assert outcome.message is not None
    assert asyncio.run(af_app.proceed(tmp_path, outcome.message)) == SENT


def test_google_adk_mints_only_open_questions_and_keeps_the_persons_payload(
    tmp_path: Path,
) -> None:
    saved = paused(adk_app, tmp_path)
    (request_id,) = saved["ledger"]

    async def session_events() -> list[Any]:
        runner = adk_app.make_runner(tmp_path)
        try:
            session = await runner.session_service.get_session(
                app_name=adk_app.APP, user_id=adk_app.USER, session_id=adk_app.CONVERSATION
            )
            assert session is not None
            return list(session.events)
        finally:
            await runner.close()

    with SQLiteLedger(tmp_path / "ledger.db") as ledger:
        again = mint_confirmations(ledger, asyncio.run(session_events()), conversation_id="conv-1")
        assert again == saved["ledger"]  # the same question, the same record
        mine = ToolConfirmation(confirmed=True, payload={"limit": 100})
        outcome = confirmations_for(ledger, saved["ledger"], {request_id: mine})
    assert outcome.message is not None
    assert outcome.message.parts is not None
    (response,) = [part.function_response for part in outcome.message.parts]
    assert response is not None
    assert response.name == "adk_request_confirmation"
    assert response.response == {"hint": "", "confirmed": True, "payload": {"limit": 100}}
    assert asyncio.run(adk_app.proceed(tmp_path, outcome.message)) == SENT
    with SQLiteLedger(tmp_path / "ledger.db") as ledger:
        assert mint_confirmations(ledger, asyncio.run(session_events()), conversation_id="c") == {}


def test_google_adk_without_the_guard_a_bare_run_after_a_crash_runs_the_tool_again(
    tmp_path: Path,
) -> None:
    """The control for ``ledger_guard`` (the crash test above): the winner crashes after
    the runner saved its confirmation, and ADK runs the confirmed call again, outside the
    ledger, on a run of the session that brings no new message."""
    paused(adk_app, tmp_path)
    _, codes = in_processes(_racer(adk_app), [(str(tmp_path), new_attempt_secret(), True)])
    assert codes == [CRASH_EXIT]
    assert asyncio.run(adk_app.bare_run(tmp_path, guard=False)) == SENT
    assert lines(tmp_path / "tool.log") == ["start", "start", "done"]


@pytest.mark.parametrize("app", APPS)
def test_a_spend_that_did_not_land_sends_nothing_and_the_pause_stays_answerable(
    app: ModuleType, tmp_path: Path
) -> None:
    good = Scripted()
    saved = asyncio.run(app.pause(tmp_path, good))
    answers = dict.fromkeys(saved["ledger"], True)
    with pytest.raises(ApprovalNotRecorded):
        app.answer_sync(Scripted(spend=raises(TimeoutError("lost"))), saved["ledger"], answers)
    lost = AsyncScripted(spend=raises(TimeoutError("lost")))
    with pytest.raises(ApprovalNotRecorded):
        asyncio.run(app.answer(lost, saved["ledger"], answers))
    outcome = app.answer_sync(good, saved["ledger"], answers)
    assert asyncio.run(app.proceed(tmp_path, outcome.message)) == SENT
    assert lines(tmp_path / "tool.log") == ["start", "done"]


@pytest.mark.parametrize("app", APPS)
def test_a_batch_runs_only_the_approved_call(app: ModuleType, tmp_path: Path) -> None:
    async def go(ledger: AsyncSQLiteLedger) -> None:
        saved = await app.pause(tmp_path, ledger, calls=2)
        yes, no = saved["ledger"]
        answers = {yes: True, no: False}
        outcome = await app.answer(ledger, saved["ledger"], answers, attempt_secret=None)
        assert outcome.decisions[yes].run
        assert outcome.decisions[no].message == "The person denied this call."
        await app.proceed(tmp_path, outcome.message)
        with pytest.raises(NotThisResume):  # the whole batch is spent: a second resume
            await app.answer(ledger, saved["ledger"], answers, attempt_secret=None)

    _with_ledger(tmp_path, go)
    assert lines(tmp_path / "tool.log") == ["start", "done"]
