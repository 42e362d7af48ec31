"""pytest plugin: the suite's options, fixtures, ordering and per-clause table.

Light, the way Hypothesis's plugin is: every pytest run where the suite is installed loads
it, so at import it needs only pytest and the suite's small pure modules.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from .collect import REFER, Collector, suite_of
from .profile import PROFILES

if TYPE_CHECKING:
    from .harness import Ledgers, Runtime

FIRST_MARK = "ledger_first"
FINAL_MARK = "ledger_final"
FORGET_MARK = "ledger_forgets"
REPORT_OPTION = "--ledger-report"
# (option naming a module:callable, option naming a shell command, what the hook does)
HOOKS = {
    "restart": ("--ledger-restart", "--ledger-restart-cmd", "restarts the store's server (C2)"),
    "forget": (
        "--ledger-forget",
        "--ledger-forget-cmd",
        "makes the whole store under test forget everything (C6 after forget; runs last)",
    ),
    "failover": (
        "--ledger-failover",
        "--ledger-failover-cmd",
        "fails the store over to a replica, at once (C6 after failover; runs last)",
    ),
    "restore": (
        "--ledger-restore",
        "--ledger-restore-cmd",
        "snapshots the store, then restores that snapshot: told the phase and the namespace "
        "(C6 after restore; runs last)",
    ),
    "after_restore": (
        "--ledger-after-restore",
        "--ledger-after-restore-cmd",
        "takes the store's documented step after a restore (decision-ledger reidentify), "
        "told the namespace; none for a store that detects restores",
    ),
}
_COLLECTOR = pytest.StashKey[Collector]()
_RUNTIME = pytest.StashKey["Runtime"]()
_STARTED = pytest.StashKey[float]()  # monotonic time at configure: the table's elapsed


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("ledger-conformance", "decision-ledger conformance suite")
    group.addoption("--ledger-url", default=None, help="run the suite against this ledger URL")
    group.addoption(
        "--ledger-factory",
        default=None,
        metavar="MODULE:CALLABLE",
        help="run the suite against ledgers made by this factory (see LedgerContext)",
    )
    for name, (path_option, cmd_option, what) in HOOKS.items():
        group.addoption(
            path_option, default=None, metavar="MODULE:CALLABLE", help=f"a callable that {what}"
        )
        group.addoption(
            cmd_option,
            default=None,
            metavar="CMD",
            help=f"a shell command that {what}; bounded, output shown if it fails ({name} hook)",
        )
    group.addoption(
        "--ledger-profile",
        default="quick",
        choices=sorted(PROFILES),
        help="how hard to push: quick (default) or thorough",
    )
    group.addoption(
        REPORT_OPTION,
        default="table",
        choices=["table", "none"],
        help="print the per-clause table (with each ledger's durability) after the run",
    )
    group.addoption(
        "--ledger-call-bound",
        type=positive_seconds,
        default=None,
        metavar="SECONDS",
        help="the longest one call may take under a fault (C4; default 10): the ledger's "
        "whole-call timeout, when it is set longer",
    )
    group.addoption(
        "--ledger-scratch",
        default=None,
        metavar="PREFIX",
        help="with --ledger-url: the prefix of every namespace the run writes "
        "(default: ledger-conformance)",
    )


def positive_seconds(text: str | float) -> float:
    """The call bound (``--ledger-call-bound``, ``check --call-bound``): seconds > 0."""
    value = float(text)
    if not value > 0:
        raise ValueError(f"not a positive number of seconds: {value:g}")
    return value


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "clause(name): the contract clause a test checks")
    config.addinivalue_line("markers", f"{FIRST_MARK}: runs before every other test")
    config.addinivalue_line("markers", f"{FINAL_MARK}: runs after every other test")
    config.addinivalue_line(
        "markers", f"{FORGET_MARK}: calls the forget hook; runs after the final checks"
    )
    config.stash[_COLLECTOR] = Collector()
    config.stash[_STARTED] = time.monotonic()
    url = config.getoption("--ledger-url", None)
    factory = config.getoption("--ledger-factory", None)
    if url and factory:
        raise pytest.UsageError("give --ledger-url or --ledger-factory, not both")
    if url:
        from ledger_core.errors import LedgerError
        from ledger_core.registry import backend_for
        from ledger_core.urls import LedgerURL

        try:
            backend_for(LedgerURL.parse(url).scheme)
        except LedgerError as exc:  # unknown scheme, missing driver, malformed URL
            raise pytest.UsageError(str(exc)) from None
    for path_option, cmd_option, _ in HOOKS.values():
        if config.getoption(path_option, None) and config.getoption(cmd_option, None):
            raise pytest.UsageError(f"give {path_option} or {cmd_option}, not both")
    hooks = [config.getoption(path_option, None) for path_option, _, _ in HOOKS.values()]
    if any(path for path in (factory, *hooks)):
        from .loading import FactoryPathError, load_factory

        for path in (factory, *hooks):
            if path:
                try:
                    load_factory(path)
                except FactoryPathError as exc:
                    raise pytest.UsageError(str(exc)) from None


def collector_of(config: pytest.Config) -> Collector:
    """The outcomes of this run's clause tests (``decision-ledger check`` reads them)."""
    return config.stash[_COLLECTOR]


def pytest_itemcollected(item: pytest.Item) -> None:
    collector = item.config.stash.get(_COLLECTOR, None)
    if collector is not None:
        collector.add_item(item)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    collector = item.config.stash.get(_COLLECTOR, None)
    if collector is not None and item.nodeid in collector.clauses:
        collector.add_report(report)
    return report


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    # C2's wait starts first and is checked at the end, so it costs little. The end-of-run
    # permanence check must see every id acknowledged in the run, and the
    # forget clauses (which legitimately lose every id) must come after it: forgetting
    # wipes the whole store, so they run after the final checks of every suite.
    if any(item.get_closest_marker("clause") is not None for item in items):
        items.sort(key=_phase)


def _phase(item: pytest.Item) -> int:
    if item.get_closest_marker(FORGET_MARK) is not None:
        return 2
    if item.get_closest_marker(FIRST_MARK) is not None:
        return -1
    return 1 if item.get_closest_marker(FINAL_MARK) is not None else 0


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """The per-clause table of each suite that ran, under what its ledgers said of
    themselves (backend, store_id, durability, capabilities): the pytest form shows what
    ``decision-ledger check`` shows."""
    collector = config.stash.get(_COLLECTOR, None)
    if collector is None or not collector.outcomes:
        return
    if config.getoption(REPORT_OPTION, "table") == "none":
        return
    from .report import render, summarize

    runtime = config.stash.get(_RUNTIME, None)
    profile = config.getoption("--ledger-profile", "quick")
    elapsed = time.monotonic() - config.stash.get(_STARTED, time.monotonic())
    for suite, outcomes in collector.by_suite().items():
        summaries = runtime.summaries.get(suite, {}) if runtime is not None else {}
        terminalreporter.write_sep("=", f"decision-ledger conformance: {suite}")
        table = render(
            summarize(outcomes),
            ledgers=list(summaries.values()),
            profile=profile,
            elapsed=elapsed,
            seed=runtime.seed if runtime is not None else None,
        )
        for line in table.splitlines():
            terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def ledger_runtime(pytestconfig: pytest.Config) -> Iterator[Runtime]:
    """Session state: the suite's event loop, the run id, acknowledged spends."""
    from .harness import Runtime
    from .profile import get_profile

    runtime = Runtime(get_profile(pytestconfig.getoption("--ledger-profile", "quick")))
    pytestconfig.stash[_RUNTIME] = runtime  # for the table
    yield runtime
    runtime.close()


@pytest.fixture(scope="session")
def ledger_option_factory(pytestconfig: pytest.Config, ledger_runtime: Runtime) -> Any:
    """The factory named on the command line, or ``None`` when there is none."""
    url = pytestconfig.getoption("--ledger-url", None)
    if url:
        from ledger_core.scratch import SCRATCH_PREFIX

        from .urlmode import URLFactory

        scratch = pytestconfig.getoption("--ledger-scratch", None) or SCRATCH_PREFIX
        return URLFactory(url, scratch)  # labels carry the run id
    path = pytestconfig.getoption("--ledger-factory", None)
    if path:
        from .loading import load_factory

        return load_factory(path)
    return None


def _option_fixture(name: str) -> Any:
    """The session fixture ``ledger_option_<name>``: the hook its option names (a
    module:callable, or a shell command with the ``-cmd`` form), or ``None``."""
    path_option, cmd_option, _ = HOOKS[name]

    @pytest.fixture(scope="session", name=f"ledger_option_{name}")
    def option_hook(pytestconfig: pytest.Config) -> Any:
        path = pytestconfig.getoption(path_option, None)
        if path:
            from .loading import load_factory

            return load_factory(path)
        command = pytestconfig.getoption(cmd_option, None)
        if not command:
            return None
        from .hooks import ShellHook

        return ShellHook(name, command)

    return option_hook


ledger_option_restart = _option_fixture("restart")
ledger_option_forget = _option_fixture("forget")
ledger_option_failover = _option_fixture("failover")
ledger_option_restore = _option_fixture("restore")
ledger_option_after_restore = _option_fixture("after_restore")


@pytest.fixture
def ledgers(
    request: pytest.FixtureRequest, ledger_runtime: Runtime, ledger_factory: Any
) -> Iterator[Ledgers]:
    """Per test: opens ledgers through ``ledger_factory`` and closes them afterwards.

    What the test's clause mark says it needs is checked first: a missing capability
    skips it as "not applicable", a missing hook or route as "not exercised".
    """
    if ledger_factory is None:
        pytest.skip(
            "not exercised: no ledger under test "
            "(pass --ledger-url URL or --ledger-factory module:callable)"
        )
    from .declare import HOOK, clause_of_mark
    from .harness import Ledgers

    opened = Ledgers(ledger_runtime, ledger_factory, suite_of(request.node.nodeid))
    try:
        marker = request.node.get_closest_marker("clause")
        needs = clause_of_mark(marker.args, dict(marker.kwargs))[1] if marker else ()
        for need in needs:
            hook = request.getfixturevalue(need.fixture) if need.kind == HOOK else None
            reason = opened.unmet(need, hook)
            if reason is not None:
                pytest.skip(reason)
        yield opened
    finally:
        for clause, text in opened.referred:
            request.node.user_properties.append((REFER, (clause, text)))
            warnings.warn(
                LedgerViolationSeen(
                    f"{request.node.name} saw a {clause} violation (see {clause}): {text}"
                ),
                stacklevel=1,
            )
        opened.close()


class LedgerViolationSeen(UserWarning):
    """A test saw another clause's violation: that clause's row in the table reports it;
    this is the trace in pytest's own warnings summary."""
