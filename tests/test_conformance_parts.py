"""Unit tests of the suite's own parts: the factory contract, URL mode, the report, the
runner's exit codes for bad input."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import pytest

from ledger_conformance import LedgerContext, enter_factory
from ledger_conformance.context import NotALedger
from ledger_conformance.hooks import HookFailed, ShellHook, factory_hook
from ledger_conformance.loading import FactoryPathError, load_factory
from ledger_conformance.report import CaseOutcome, render, summarize, summarize_ledger
from ledger_conformance.runner import run_check
from ledger_conformance.urlmode import URLFactory, namespace_for, rewrite, routable
from ledger_core import AsyncMemoryLedger, MemoryLedger, MemoryStore
from ledger_core.protocol import Durability, LedgerInfo
from tests.conformance_unit.runs import run_pytest


def _route(host: str, port: int) -> tuple[str, int]:
    return "127.0.0.9", port + 1


class _Closing:
    def __init__(self) -> None:
        self.closed = False

    def spend(self, request_id: str) -> bool:
        return True

    def close(self) -> None:
        self.closed = True


def _open(factory: Any) -> tuple[Any, Any]:
    async def go() -> tuple[Any, Any]:
        ledger, cleanup = await enter_factory(factory, LedgerContext("s"))
        await cleanup()
        return ledger, cleanup

    return asyncio.run(go())


def test_enter_factory_plain_sync_ledger_is_closed() -> None:
    made = _Closing()
    ledger, _ = _open(lambda ctx: made)
    assert ledger is made
    assert made.closed


def test_enter_factory_awaitable_and_async_ledger() -> None:
    store = MemoryStore()

    async def factory(ctx: LedgerContext) -> AsyncMemoryLedger:
        return AsyncMemoryLedger(store)

    ledger, _ = _open(factory)
    assert isinstance(ledger, AsyncMemoryLedger)


def test_enter_factory_context_managers() -> None:
    events: list[str] = []

    @contextmanager
    def sync_cm(ctx: LedgerContext) -> Iterator[MemoryLedger]:
        events.append("enter")
        yield MemoryLedger()
        events.append("exit")

    @asynccontextmanager
    async def async_cm(ctx: LedgerContext) -> AsyncIterator[MemoryLedger]:
        events.append("aenter")
        yield MemoryLedger()
        events.append("aexit")

    assert isinstance(_open(sync_cm)[0], MemoryLedger)
    assert isinstance(_open(async_cm)[0], MemoryLedger)
    assert events == ["enter", "exit", "aenter", "aexit"]


def test_enter_factory_refuses_a_non_ledger() -> None:
    with pytest.raises(NotALedger, match="no spend"):
        _open(lambda ctx: object())


def test_url_rewrite_goes_through_route_and_keeps_credentials() -> None:
    ctx = LedgerContext("s", route=_route)
    assert rewrite("redis://:pw@db.local:6380/0?x=1", ctx) == "redis://:pw@127.0.0.9:6381/0?x=1"
    assert rewrite("postgresql://u@h/db", ctx) == "postgresql://u@127.0.0.9:5433/db"
    assert rewrite("sqlite:////tmp/x.db", ctx) == "sqlite:////tmp/x.db"
    assert not routable("memory://name")
    assert not routable("postgresql://u@h1:1,h2:2/db")


def test_namespaces_unique_per_run_and_bounded() -> None:
    assert namespace_for("r1", "a") != namespace_for("r2", "a")
    long = namespace_for("r1", "x" * 400)
    assert len(long.encode()) <= 256
    assert long != namespace_for("r1", "x" * 401)


def test_url_factory_opens_a_namespace_per_label(tmp_path: Path) -> None:
    factory = URLFactory(f"sqlite:///{tmp_path / 'l.db'}", "run")
    a, b = factory(LedgerContext("a")), factory(LedgerContext("b"))
    try:
        assert a.store_id != b.store_id
        assert a.spend("x") is True
        assert b.spend("x") is True
    finally:
        a.close()
        b.close()


def test_load_factory_errors_are_one_line() -> None:
    assert load_factory("json:dumps") is not None
    for bad in ("json", "no_such_module_xyz:f", "json:no_such_attr", "json:__doc__"):
        with pytest.raises(FactoryPathError) as info:
            load_factory(bad)
        assert "\n" not in str(info.value)


def test_report_groups_by_clause() -> None:
    rows = summarize(
        [
            CaseOutcome("C1", "test_C1_a", "passed"),
            CaseOutcome("C1", "test_C1_b", "failed", "AssertionError: two winners"),
            CaseOutcome("C4", "test_C4_x", "skipped", "not exercised: no proxy"),
            CaseOutcome("H5", "test_H5_y", "skipped", "not applicable: store_id is None"),
            CaseOutcome("C2", "test_C2_z", "passed"),
        ]
    )
    status = {row.clause: row.status for row in rows}
    assert status == {
        "C1": "failed",
        "C2": "passed",
        "C4": "not exercised",
        "H5": "not applicable",
    }
    table = render(rows)
    assert "two winners" in table
    assert "no proxy" in table


@pytest.mark.parametrize(
    ("url", "factory", "code", "says"),
    [
        (None, None, 2, "exactly one"),
        ("memory://", "json:dumps", 2, "exactly one"),
        (None, "no_such_module_xyz:f", 2, "cannot import"),
        (None, "json:dumps", 2, "raised TypeError"),
        ("nosuchscheme://x", None, 2, "no ledger backend"),
        ("sqlite:////nonexistent-dir/x.db", None, 3, "cannot reach"),
    ],
)
def test_run_check_bad_input(
    capsys: pytest.CaptureFixture[str], url: str | None, factory: str | None, code: int, says: str
) -> None:
    assert run_check(url=url, factory=factory, profile="quick") == code
    err = capsys.readouterr().err
    assert says in err
    assert len(err.strip().splitlines()) == 1


def test_run_check_unknown_profile(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_check(url="memory://", factory=None, profile="fast") == 2
    assert "profile" in capsys.readouterr().err


def test_shell_hook_returns_output_and_fails_with_it() -> None:
    assert "hello" in ShellHook("forget", "echo hello")()
    with pytest.raises(HookFailed, match=r"status 3; output: first \| second"):
        ShellHook("restart", "echo first; echo second >&2; exit 3")()


def test_shell_hook_is_bounded_and_kills_its_whole_group() -> None:
    started = time.monotonic()
    with pytest.raises(HookFailed, match=r"did not finish within 0\.5 s"):
        ShellHook("restart", "sleep 30 & sleep 30; echo never", timeout=0.5)()
    assert time.monotonic() - started < 10


def test_shell_hook_never_shows_its_command() -> None:
    hook = ShellHook("forget", "redis-cli -a hunter2-secret FLUSHALL; exit 1")
    assert "hunter2" not in repr(hook)
    with pytest.raises(HookFailed) as info:
        hook()
    assert "hunter2" not in str(info.value).split("output:")[0]


def test_render_shows_each_ledgers_durability_and_reason() -> None:
    class Described:
        def spend(self, request_id: str) -> bool:
            return True

        def describe(self) -> LedgerInfo:
            return LedgerInfo("acme", "acme:1", durability=Durability.PROCESS)

    summaries = [
        summarize_ledger(Described(), "sync"),
        summarize_ledger(AsyncMemoryLedger(), "async"),
    ]
    table = render([], ledgers=summaries, width=400)
    assert "ledger (sync): acme, store_id acme:1, durability process-crash" in table
    assert "ledger (async): memory, store_id None (never proves)" in table
    assert "reason: in-process memory" in table


def test_factory_hooks_are_attributes() -> None:
    class Factory:
        def __call__(self, ctx: LedgerContext) -> MemoryLedger:
            return MemoryLedger()

        def ledger_forget(self) -> None:
            pass

    assert factory_hook(Factory(), "ledger_forget") is not None
    assert factory_hook(Factory(), "ledger_restart") is None
    assert factory_hook(lambda ctx: None, "ledger_forget") is None


@pytest.mark.parametrize("hook", ["restart", "forget"])
def test_a_hook_given_twice_is_a_usage_error(hook: str) -> None:
    done = run_pytest(
        "--pyargs", "ledger_conformance", "--ledger-url", "memory://x",
        f"--ledger-{hook}", "json:dumps", f"--ledger-{hook}-cmd", "true",
        timeout=120,
    )  # fmt: skip
    assert done.returncode == pytest.ExitCode.USAGE_ERROR
    assert f"--ledger-{hook} or --ledger-{hook}-cmd, not both" in done.stderr


def test_forget_clauses_run_after_the_final_check() -> None:
    done = run_pytest(
        "--pyargs", "ledger_conformance", "--ledger-url", "memory://x", "--collect-only", "-q",
        timeout=120,
    )  # fmt: skip
    names = [line.rsplit("::", 1)[-1] for line in done.stdout.splitlines() if "::" in line]
    # The final checks (reads only: none acknowledges a spend) in any order, then the
    # tests that forget (fail over, restore) the store, and nothing after them.
    forgets = (
        "test_C6_forgotten",
        "test_C6_forget",
        "test_C6_failover",
        "test_C6_restore",
        "test_M1_sequences_across_forgets",
    )
    first = next(i for i, name in enumerate(names) if name.startswith(forgets))
    assert all(name.startswith(forgets) for name in names[first:]), names[first:]
    assert names[first : first + 2] == [
        "test_C6_forgotten_store_old_instance",
        "test_C6_forgotten_store_new_instance",
    ], names[first:]
    assert sorted(names[first - 4 : first]) == [
        "test_C2_after_waiting",
        "test_C2_every_acknowledged_id_still_spent",
        "test_C2_volume_after_waiting",
        "test_C6_store_id_stable_over_the_stores_life",
    ], names[first - 5 :]
