"""pytest plugin: the suite's options, fixtures and ordering.

Registered as a ``pytest11`` entry point, so ``pytest --pyargs ledger_conformance
--ledger-url URL`` (or ``--ledger-factory module:callable``) runs the suite, and a
project's own tests can subclass :class:`ledger_conformance.LedgerConformance`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from ledger_core.errors import LedgerError
from ledger_core.registry import backend_for
from ledger_core.urls import LedgerURL

from .harness import Ledgers, Runtime
from .loading import FactoryPathError, load_factory
from .profile import PROFILES, get_profile
from .urlmode import URLFactory

FINAL_MARK = "ledger_final"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("ledger-conformance", "decision-ledger conformance suite")
    group.addoption("--ledger-url", default=None, help="run the suite against this ledger URL")
    group.addoption(
        "--ledger-factory",
        default=None,
        metavar="MODULE:CALLABLE",
        help="run the suite against ledgers made by this factory (see LedgerContext)",
    )
    group.addoption(
        "--ledger-restart",
        default=None,
        metavar="MODULE:CALLABLE",
        help="a callable that restarts the store's server (C2 across a restart)",
    )
    group.addoption(
        "--ledger-profile",
        default="quick",
        choices=sorted(PROFILES),
        help="how hard to push: quick (default) or thorough",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "clause(name): the contract clause a test checks")
    config.addinivalue_line("markers", f"{FINAL_MARK}: runs after every other test")
    url = config.getoption("--ledger-url", None)
    factory = config.getoption("--ledger-factory", None)
    if url and factory:
        raise pytest.UsageError("give --ledger-url or --ledger-factory, not both")
    if url:
        try:
            backend_for(LedgerURL.parse(url).scheme)
        except LedgerError as exc:  # unknown scheme, missing driver, malformed URL
            raise pytest.UsageError(str(exc)) from None
    for path in (factory, config.getoption("--ledger-restart", None)):
        if path:
            try:
                load_factory(path)
            except FactoryPathError as exc:
                raise pytest.UsageError(str(exc)) from None


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    # The end-of-run permanence check must see every id acknowledged in the run.
    items.sort(key=lambda item: item.get_closest_marker(FINAL_MARK) is not None)


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
        return URLFactory(url, ledger_runtime.run_id)
    path = pytestconfig.getoption("--ledger-factory", None)
    if path:
        return load_factory(path)
    return None


@pytest.fixture(scope="session")
def ledger_option_restart(pytestconfig: pytest.Config) -> Any:
    """The restart hook named by --ledger-restart, or ``None``."""
    path = pytestconfig.getoption("--ledger-restart", None)
    return load_factory(path) if path else None


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
        opened.close()
