"""``decision-ledger check``: run the suite in-process and print the per-clause table.

Exit codes: 0 every clause passed (or was not exercised, with the reason shown); 1 a
clause failed; 2 usage (both or neither of URL and factory, a bad factory path, a
factory that raised); 3 the store cannot be reached. Bad input is one line on stderr.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from ledger_core.errors import InvalidLedgerURL, LedgerError, LedgerUnavailable, MissingDriver
from ledger_core.protocol import is_async_ledger
from ledger_core.registry import backend_for
from ledger_core.scratch import SCRATCH_PREFIX
from ledger_core.urls import LedgerURL, redact_url

from .context import LedgerContext, NotALedger, enter_factory
from .harness import error_text
from .isolate import run_isolated
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
OK, FAILED, USAGE, UNAVAILABLE = 0, 1, 2, 3
PREFLIGHT_TIMEOUT = 30.0
# The plugins a check loads, and no others (entry-point autoload is off in its child).
PLUGINS = ("-p", "ledger_conformance.plugin", "-p", "_hypothesis_pytestplugin")
_UNREACHABLE = (LedgerUnavailable, ConnectionError, TimeoutError, OSError)


class _Refused(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def _in_scratch(scratch: str, run: Callable[[], T]) -> T:
    """Run with hypothesis's home (its unicode cache) in ``scratch``: ``check`` writes
    nothing into the working directory. Only the suite's own plugins load (see ``PLUGINS``):
    an installed one could reorder, rerun or time out clauses, and some cost seconds."""
    import hypothesis.configuration as hypothesis_config

    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # in the forked child only

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


async def _preflight(factory: Any) -> list[LedgerSummary]:
    """Open each variant once: a dead store fails here, and the report shows what each
    ledger claims (store_id, durability, reason)."""
    summaries: list[LedgerSummary] = []
    seen: set[type] = set()
    for flavor in ("sync", "async"):
        ctx = LedgerContext(store="preflight", flavor=flavor)
        ledger, cleanup = await enter_factory(factory, ctx)
        try:
            if type(ledger) in seen:
                continue  # the factory has one variant only
            seen.add(type(ledger))
            summaries.append(
                summarize_ledger(ledger, "async" if is_async_ledger(ledger) else "sync")
            )
            probe = getattr(ledger, "is_spent", None)
            if callable(probe):
                result = probe("decision-ledger-check-preflight")
                if asyncio.iscoroutine(result):
                    await result
        finally:
            await cleanup()
    return summaries


def _check_reachable(factory: Any, what: str) -> list[LedgerSummary]:
    """Open the ledgers before the run, so a bad factory or a dead store is one clear line."""
    try:
        return asyncio.run(asyncio.wait_for(_preflight(factory), PREFLIGHT_TIMEOUT))
    except _UNREACHABLE as exc:
        raise _Refused(
            UNAVAILABLE, f"cannot reach the store of {what}: {error_text(exc)}"
        ) from None
    except (NotALedger, LedgerError) as exc:
        raise _Refused(USAGE, f"{what}: {error_text(exc)}") from None
    except Exception as exc:
        raise _Refused(USAGE, f"the factory {what} raised {error_text(exc)}") from None


def run_check(
    *,
    url: str | None,
    factory: str | None,
    profile: str,
    restart: str | None = None,
    forget: str | None = None,
    failover: str | None = None,
    select: str | None = None,
    keep_scratch: bool = False,
    verbose: bool = False,
    report: str | None = None,
    junit: str | None = None,
    call_bound: float | None = None,
) -> int:
    """Run the suite against one ledger; print the table; return the exit code.

    ``restart``, ``forget`` and ``failover`` are shell commands; ``select`` is pytest's
    ``-k``. With a URL, the run's namespaces are removed afterwards where the backend can,
    unless ``keep_scratch``. pytest's own output goes to a log file unless ``verbose``.
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
    hooks = {"restart": restart, "forget": forget, "failover": failover}
    for name, command in hooks.items():
        if command is not None and not command.strip():
            _fail(f"--{name} needs a shell command")
            return USAGE
    # One clearly named scratch prefix per check: every namespace the run writes starts
    # with it, so what is left in the user's store can be counted, named and removed.
    scratch_prefix = f"{SCRATCH_PREFIX}-{secrets.token_hex(3)}"
    try:
        made = _factory_from(url, factory, scratch_prefix)
        summaries = _check_reachable(made, redact_url(url) if url else str(factory))
    except _Refused as refused:
        _fail(str(refused))
        return refused.code
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

        done = run_isolated(
            run, [], Path(home), log, after=scratch, inside=lambda child: _in_scratch(home, child)
        )
    rows = summarize(done.outcomes.values())
    code = done.code
    if not done.tail and url:  # the last child crashed: remove the scratch from here
        done.tail = scratch()
    print()
    print(render(rows, ledgers=summaries))
    for line in [*done.crashes, *done.tail]:
        print(line)
    verdict = _verdict(code, rows, done.crashes)
    if report or junit:
        document = report_document(
            rows,
            done.outcomes.values(),
            summaries,
            profile=profile,
            target=redact_url(url) if url else str(factory),
            exit_code=verdict,
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
