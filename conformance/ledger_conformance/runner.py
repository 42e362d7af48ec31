"""``decision-ledger check``: run the suite in-process and print the per-clause table.

Exit codes: 0 every clause passed (or was not exercised, with the reason shown); 1 a
clause failed; 2 usage (both or neither of URL and factory, a bad factory path, a
factory that raised); 3 the store cannot be reached. Bad input is one line on stderr.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import secrets
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any, TypeVar

import pytest

from ledger_core.errors import InvalidLedgerURL, LedgerError, LedgerUnavailable, MissingDriver
from ledger_core.protocol import is_async_ledger
from ledger_core.registry import backend_for
from ledger_core.scratch import SCRATCH_PREFIX, SCRATCH_TIMEOUT
from ledger_core.urls import LedgerURL, redact_url

from .axes import SEED_ENV, replay_note, run_seed
from .context import LedgerContext, NotALedger, enter_factory
from .harness import error_text
from .isolate import IsolatedRun, call_in_child, run_isolated
from .loading import FactoryPathError, load_factory
from .plugin import positive_seconds
from .profile import PROFILES
from .report import (
    ClauseResult,
    LedgerSummary,
    junit_xml,
    render,
    report_document,
    summarize,
    summarize_ledger,
)
from .scratch import scratch_lines

T = TypeVar("T")
Step = Callable[[str], None]  # says what the child calls into next (a crash names it)
OK, FAILED, USAGE, UNAVAILABLE = 0, 1, 2, 3
PREFLIGHT_TIMEOUT = 30.0
# The child that opens the ledgers: the preflight's own bound is on its event loop, which
# a sync factory that hangs blocks; this one kills the child.
CHILD_BOUND = 2 * PREFLIGHT_TIMEOUT
SCRATCH_BOUND = 2 * SCRATCH_TIMEOUT  # the removal's own timeout, with room to close
# The plugins a check loads, and no others (entry-point autoload is off in its child).
PLUGINS = ("-p", "ledger_conformance.plugin", "-p", "_hypothesis_pytestplugin")
_UNREACHABLE = (LedgerUnavailable, ConnectionError, TimeoutError, OSError)


class _Refused(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def _in_scratch(scratch: str, seed: int, run: Callable[[], T]) -> T:
    """Run with hypothesis's home (its unicode cache) in ``scratch``: ``check`` writes
    nothing into the working directory. Only the suite's own plugins load (see ``PLUGINS``):
    an installed one could reorder, rerun or time out clauses, and some cost seconds.
    Every child draws from the check's one ``seed`` (the one its header shows), also the
    one that runs what is left after a crash."""
    import hypothesis.configuration as hypothesis_config

    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # in the forked child only
    os.environ[SEED_ENV] = str(seed)

    previous = hypothesis_config.storage_directory()
    hypothesis_config.set_hypothesis_home_dir(scratch)
    try:
        return run()
    finally:
        hypothesis_config.set_hypothesis_home_dir(str(previous))


def _fail(message: str) -> None:
    print(f"decision-ledger check: {message}", file=sys.stderr)


def _factory_from(url: str | None, factory: str | None, scratch: str) -> Any:
    if bool(url) == bool(factory):
        raise _Refused(USAGE, "give a ledger URL or --factory module:callable (exactly one)")
    if factory:
        try:
            return load_factory(factory)
        except FactoryPathError as exc:
            raise _Refused(USAGE, str(exc)) from None
    assert url is not None
    try:
        backend_for(LedgerURL.parse(url).scheme)
    except (MissingDriver, InvalidLedgerURL) as exc:
        raise _Refused(USAGE, str(exc)) from None
    from .urlmode import URLFactory

    return URLFactory(url, scratch)


async def _preflight(factory: Any, step: Step) -> list[LedgerSummary]:
    """Open each variant once: a dead store fails here, and the report shows what each
    ledger claims (store_id, durability, reason)."""
    summaries: list[LedgerSummary] = []
    seen: set[type] = set()
    for flavor in ("sync", "async"):
        ctx = LedgerContext(store="preflight", flavor=flavor)
        step(f"opening the {flavor} ledger (the factory call), before any clause ran")
        ledger, cleanup = await enter_factory(factory, ctx)
        try:
            if type(ledger) in seen:
                continue  # the factory has one variant only
            seen.add(type(ledger))
            step(f"in describe() of the {flavor} ledger, before any clause ran")
            summaries.append(
                summarize_ledger(ledger, "async" if is_async_ledger(ledger) else "sync")
            )
            probe = getattr(ledger, "is_spent", None)
            if callable(probe):
                step(f"in the {flavor} ledger's first is_spent, before any clause ran")
                result = probe("decision-ledger-check-preflight")
                if asyncio.iscoroutine(result):
                    await result
        finally:
            step(f"closing the {flavor} ledger, before any clause ran")
            await cleanup()
    return summaries


def _check_reachable(factory: Any, what: str, step: Step) -> list[LedgerSummary]:
    """Open the ledgers before the run, so a bad factory or a dead store is one clear line."""
    try:
        return asyncio.run(asyncio.wait_for(_preflight(factory, step), PREFLIGHT_TIMEOUT))
    except _UNREACHABLE as exc:
        raise _Refused(
            UNAVAILABLE, f"cannot reach the store of {what}: {error_text(exc)}"
        ) from None
    except (NotALedger, LedgerError) as exc:
        raise _Refused(USAGE, f"{what}: {error_text(exc)}") from None
    except Exception as exc:
        raise _Refused(USAGE, f"the factory {what} raised {error_text(exc)}") from None


def _reach(url: str | None, factory: str | None, scratch: str, step: Step) -> dict[str, Any]:
    """In a child (see :func:`call_in_child`): load the factory, open each variant, say
    what each ledger claims; or the refusal's exit code and line."""
    what = redact_url(url) if url else str(factory)
    try:
        step(f"loading the factory {what}, before any clause ran")
        made = _factory_from(url, factory, scratch)
        return {"ledgers": [asdict(s) for s in _check_reachable(made, what, step)]}
    except _Refused as refused:
        return {"refused": [refused.code, str(refused)]}


def _summary(found: dict[str, Any]) -> LedgerSummary:
    capabilities = found.get("capabilities")
    return LedgerSummary(**{**found, "capabilities": _tuple(capabilities)})


def _tuple(found: list[str] | None) -> tuple[str, ...] | None:
    return None if found is None else tuple(found)


def run_check(
    *,
    url: str | None,
    factory: str | None,
    profile: str,
    restart: str | None = None,
    forget: str | None = None,
    failover: str | None = None,
    restore: str | None = None,
    after_restore: str | None = None,
    select: str | None = None,
    keep_scratch: bool = False,
    verbose: bool = False,
    report: str | None = None,
    junit: str | None = None,
    call_bound: float | None = None,
) -> int:
    """Run the suite against one ledger; print the table; return the exit code.

    ``restart``, ``forget``, ``failover``, ``restore`` and ``after_restore`` are shell
    commands; ``select`` is pytest's ``-k``. With a URL, the run's namespaces are removed
    afterwards where the backend can, unless ``keep_scratch``. pytest's own output goes to
    a log file unless ``verbose``.
    """
    if profile not in PROFILES:
        _fail(f"unknown profile {profile!r} (expected one of: {', '.join(PROFILES)})")
        return USAGE
    if call_bound is not None:
        try:
            positive_seconds(call_bound)
        except ValueError as exc:
            _fail(f"--call-bound: {exc}")
            return USAGE
    try:
        seed = run_seed()  # drawn here, or LEDGER_CONFORMANCE_SEED: a run replayed
    except ValueError as exc:
        _fail(str(exc))
        return USAGE
    hooks = {"restart": restart, "forget": forget, "failover": failover, "restore": restore}
    hooks["after-restore"] = after_restore
    for name, command in hooks.items():
        if command is not None and not command.strip():
            _fail(f"--{name} needs a shell command")
            return USAGE
    # One clearly named scratch prefix per check: every namespace the run writes starts
    # with it, so what is left in the user's store can be counted, named and removed.
    scratch_prefix = f"{SCRATCH_PREFIX}-{secrets.token_hex(3)}"
    began = time.monotonic()
    target = redact_url(url) if url else str(factory)
    reached = _reach_isolated(url, factory, scratch_prefix, target)
    if isinstance(reached, int):
        return reached
    if isinstance(reached, IsolatedRun):  # it crashed before any clause: the line says where
        return _finish(reached, [], profile=profile, target=target, began=began, log=None,
                       report=report, junit=junit, seed=seed)  # fmt: skip
    summaries = reached
    args = ["--pyargs", "ledger_conformance", *PLUGINS, "--ledger-profile", profile]
    args += ["--ledger-report", "none", "--ledger-scratch", scratch_prefix]
    args += ["--ledger-url", url] if url else ["--ledger-factory", str(factory)]
    for name, command in hooks.items():
        if command:
            args += [f"--ledger-{name}-cmd", command]
    if call_bound is not None:
        args += ["--ledger-call-bound", repr(float(call_bound))]  # exact, never rounded
    if select:
        args += ["-k", select]
    args += ["-p", "no:cacheprovider", "-q", "--tb=short"]
    args += ["-o", "addopts=", "-W", "ignore::DeprecationWarning"]
    log = None if verbose else _log_file()
    if log is not None:  # said before the run: a check leaves this file behind
        print(f"pytest's own output goes to {log} (--verbose shows it here)", flush=True)
    with tempfile.TemporaryDirectory(prefix="decision-ledger-check-") as home:
        # An empty configuration of the check's own: no pytest.ini, tox.ini or pyproject.toml
        # near the installed suite (a source checkout's: its per-test timeout, addopts,
        # warning filters) changes what a check runs or how long a clause may take.
        config = Path(home, "pytest.ini")
        config.write_text("[pytest]\n", encoding="utf-8")
        run = [*args, "--rootdir", home, "-c", str(config)]

        def scratch() -> list[str]:  # in the child: a memory store's namespaces live there
            return scratch_lines(url, scratch_prefix, keep=keep_scratch) if url else []

        inside = functools.partial(_in_scratch, home, seed)
        done = run_isolated(run, [], Path(home), log, after=scratch, inside=inside)
    if not done.tail and url:  # the last child crashed: remove the scratch in another
        done.tail = _scratch_isolated(scratch)
    return _finish(done, summaries, profile=profile, target=target, began=began, log=log,
                   report=report, junit=junit, seed=seed)  # fmt: skip


def _reach_isolated(
    url: str | None, factory: str | None, scratch: str, target: str
) -> list[LedgerSummary] | IsolatedRun | int:
    """Every call into the store runs in a forked child, this one's first: what each ledger
    says of itself; or the crash (a store that crashes the interpreter opening or
    describing itself gets a line, not a dead check); or the exit code, its line said."""
    reached = call_in_child(functools.partial(_reach, url, factory, scratch), CHILD_BOUND)
    if reached.hung is not None:
        _fail(f"cannot reach the store of {target}: {reached.hung}")
        return UNAVAILABLE
    if reached.error is not None:
        _fail(f"the check could not open the ledger: {reached.error}")
        return USAGE
    if reached.crash is not None:
        return IsolatedRun(code=FAILED, crashes=[reached.crash_line("opening the ledger")])
    if "refused" in reached.value:
        code, message = reached.value["refused"]
        _fail(message)
        return int(code)
    return [_summary(found) for found in reached.value["ledgers"]]


def _scratch_isolated(scratch: Callable[[], list[str]]) -> list[str]:
    """The scratch lines, removed in a child of their own (the run's last child crashed)."""
    removed = call_in_child(lambda step: scratch(), SCRATCH_BOUND)
    if removed.crash is not None:
        return [f"scratch: {removed.crash_line('removing the scratch')}"]
    if removed.error is not None or removed.hung is not None:
        return [f"scratch: removing it failed ({removed.error or removed.hung})"]
    return [str(line) for line in removed.value]


def _finish(
    done: IsolatedRun,
    summaries: list[LedgerSummary],
    *,
    profile: str,
    target: str,
    began: float,
    log: Path | None,
    report: str | None,
    junit: str | None,
    seed: int,
) -> int:
    """Print the table, the crashes and the scratch lines; write the report files; the
    exit code."""
    rows = summarize(done.outcomes.values())
    elapsed = time.monotonic() - began
    print()
    if rows or not done.crashes:
        print(render(rows, ledgers=summaries, profile=profile, elapsed=elapsed, seed=seed))
    else:  # crashed before any clause ran: the crash is the whole answer
        print(f"no clause ran (profile {profile}, {elapsed:.1f} s; {replay_note(seed)})")
    for line in [*done.crashes, *done.tail]:
        print(line)
    verdict = _verdict(done.code, rows, done.crashes)
    if report or junit:
        document = report_document(
            rows,
            done.outcomes.values(),
            summaries,
            profile=profile,
            target=target,
            exit_code=verdict,
            elapsed=elapsed,
            crashes=done.crashes,
            seed=seed,
        )
        if report:
            Path(report).write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
        if junit:
            Path(junit).write_text(junit_xml(document), encoding="utf-8")
    if log is not None:
        print(f"pytest output: {log}")
    return verdict


def _log_file() -> Path:
    """Where a quiet check puts pytest's own output (dots, warnings, tracebacks)."""
    fd, name = tempfile.mkstemp(prefix="decision-ledger-check-", suffix=".log")
    os.close(fd)
    return Path(name)


def _verdict(code: int, rows: list[ClauseResult], crashes: list[str]) -> int:
    if code == pytest.ExitCode.USAGE_ERROR:
        return USAGE
    if crashes or code not in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        return FAILED
    return FAILED if any(r.status == "failed" for r in rows) or not rows else OK
