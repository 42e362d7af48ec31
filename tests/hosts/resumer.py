"""A resume in a (spawned) process on the ledger a test names; and the resume of the
Google ADK and Agent Framework test apps: answer every pending request through the
ledger, persist an H5 re-ask, else continue the paused run with the outcome's message."""

from __future__ import annotations

import asyncio
import importlib
import json
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any

from ledger_core import open_async_ledger
from tests.hosts.common import ledger_url

Resume = Callable[..., Awaitable[str]]  # (root, ledger, secret, crash=) -> what the model said


async def resume(
    app: ModuleType,
    root: Path,
    ledger: object,
    secret: str | None,
    *,
    crash: bool = False,
    approve: bool = True,
) -> str:
    """``app.answer`` (the integration's async answer call) every pending request, then
    ``app.proceed`` (continue the paused run with the outcome's message)."""
    saved = json.loads((root / "run.json").read_text())
    answers = dict.fromkeys(saved["ledger"], approve)
    outcome = await app.answer(ledger, saved["ledger"], answers, attempt_secret=secret)
    if outcome.message is None:
        saved["ledger"] = outcome.ask_again  # persist, then ask the person again
        (root / "run.json").write_text(json.dumps(saved))
        return "ask-again"
    return str(await app.proceed(root, outcome.message, crash=crash))


def in_process(resume: Resume, workdir: str, secret: str, crash: bool) -> str:
    """One resume in this (spawned) process, on the ledger the test names."""

    async def go() -> str:
        ledger: Any = await open_async_ledger(ledger_url(Path(workdir)))
        try:
            return await resume(Path(workdir), ledger, secret or None, crash=crash)
        finally:
            await ledger.aclose()

    return asyncio.run(go())


def app_in_process(app_name: str, workdir: str, secret: str, crash: bool) -> str:
    """:func:`resume` of the app module ``app_name``, in this process (picklable, for
    spawned processes, through ``functools.partial``)."""
    return in_process(partial(resume, importlib.import_module(app_name)), workdir, secret, crash)
