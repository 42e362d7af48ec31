"""pytest plugin: the suite's options, fixtures and ordering.

Registered as a ``pytest11`` entry point, so ``pytest --pyargs ledger_conformance
--ledger-url URL`` (or ``--ledger-factory module:callable``) runs the suite, and a
project's own tests can subclass :class:`ledger_conformance.LedgerConformance`.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any

import pytest

from ledger_core.errors import LedgerError
from ledger_core.registry import backend_for
from ledger_core.urls import LedgerURL

from .harness import REFER, Ledgers, Runtime
from .hooks import ShellHook
from .loading import FactoryPathError, load_factory
from .profile import PROFILES, get_profile
from .urlmode import SCRATCH_PREFIX, URLFactory

FIRST_MARK = "ledger_first"
FINAL_MARK = "ledger_final"
FORGET_MARK = "ledger_forgets"
# (option naming a module:callable, option naming a shell command, what the hook does)
HOOKS = {
    "restart": ("--ledger-restart", "--ledger-restart-cmd", "restarts the store's server (C2)"),
    "forget": (
        "--ledger-forget",
        "--ledger-forget-cmd",
        "makes the whole store under test forget everything (C6 after forget; runs last)",
    ),
}


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


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "clause(name): the contract clause a test checks")
    config.addinivalue_line("markers", f"{FIRST_MARK}: runs before every other test")
    config.addinivalue_line("markers", f"{FINAL_MARK}: runs after every other test")
    config.addinivalue_line(
        "markers", f"{FORGET_MARK}: calls the forget hook; runs after the final checks"
    )
    url = config.getoption("--ledger-url", None)
    factory = config.getoption("--ledger-factory", None)
    if url and factory:
        raise pytest.UsageError("give --ledger-url or --ledger-factory, not both")
    if url:
        try:
            backend_for(LedgerURL.parse(url).scheme)
        except LedgerError as exc:  # unknown scheme, missing driver, malformed URL
            raise pytest.UsageError(str(exc)) from None
    for path_option, cmd_option, _ in HOOKS.values():
        if config.getoption(path_option, None) and config.getoption(cmd_option, None):
            raise pytest.UsageError(f"give {path_option} or {cmd_option}, not both")
    hooks = [config.getoption(path_option, None) for path_option, _, _ in HOOKS.values()]
    for path in (factory, *hooks):
        if path:
            try:
                load_factory(path)
            except FactoryPathError as exc:
                raise pytest.UsageError(str(exc)) from None


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    # C2's wait starts first and is checked at the end, so it costs little. The end-of-run
    # permanence check must see every id acknowledged in the run, and the
    # forget clauses (which legitimately lose every id) must come after it: forgetting
    # wipes the whole store, so they run after the final checks of every suite.
    items.sort(key=_phase)


def _phase(item: pytest.Item) -> int:
    if item.get_closest_marker(FORGET_MARK) is not None:
        return 2
    if item.get_closest_marker(FIRST_MARK) is not None:
        return -1
    return 1 if item.get_closest_marker(FINAL_MARK) is not None else 0


@pytest.fixture(scope="session")
def ledger_runtime(pytestconfig: pytest.Config) -> Iterator[Runtime]:
    """Session state: the suite's event loop, the run id, acknowledged spends."""
    runtime = Runtime(get_profile(pytestconfig.getoption("--ledger-profile", "quick")))
    yield runtime
    runtime.close()


@pytest.fixture(scope="session")
def ledger_option_factory(pytestconfig: pytest.Config, ledger_runtime: Runtime) -> Any:
    """The factory named on the command line, or ``None`` when there is none."""
    url = pytestconfig.getoption("--ledger-url", None)
    if url:
        return URLFactory(url, SCRATCH_PREFIX)  # labels carry the run id
    path = pytestconfig.getoption("--ledger-factory", None)
    if path:
        return load_factory(path)
    return None


def _option_hook(config: pytest.Config, name: str) -> Any:
    path_option, cmd_option, _ = HOOKS[name]
    path = config.getoption(path_option, None)
    if path:
        return load_factory(path)
    command = config.getoption(cmd_option, None)
    return ShellHook(name, command) if command else None


@pytest.fixture(scope="session")
def ledger_option_restart(pytestconfig: pytest.Config) -> Any:
    """The restart hook named by --ledger-restart (or --ledger-restart-cmd), or ``None``."""
    return _option_hook(pytestconfig, "restart")


@pytest.fixture(scope="session")
def ledger_option_forget(pytestconfig: pytest.Config) -> Any:
    """The forget hook named by --ledger-forget (or --ledger-forget-cmd), or ``None``."""
    return _option_hook(pytestconfig, "forget")


@pytest.fixture
def ledgers(
    request: pytest.FixtureRequest, ledger_runtime: Runtime, ledger_factory: Any
) -> Iterator[Ledgers]:
    """Per test: opens ledgers through ``ledger_factory`` and closes them afterwards."""
    if ledger_factory is None:
        pytest.skip(
            "not exercised: no ledger under test "
            "(pass --ledger-url URL or --ledger-factory module:callable)"
        )
    parts = request.node.nodeid.split("::")
    suite_key = "::".join(parts[:-1])
    opened = Ledgers(ledger_runtime, ledger_factory, suite_key)
    try:
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
    """A test saw another clause's violation: that clause's tests report it; this is the
    trace for the pytest form, where the per-clause table is not printed."""
