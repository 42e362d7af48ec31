"""``testing_hook(scheme, name)``: a backend's ``testing = "module:attr"`` reference first
(imported only when a hook is asked for), else the backend's own method, else ``None``;
a reference that cannot be loaded is an error, never "no hook"."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ledger_core import MemoryLedger, open_ledger, registry
from ledger_core.errors import BackendLoadError, MissingDriver
from ledger_core.opening import OpenRequest
from ledger_core.registry import _registered, register_backend
from ledger_core.urls import LedgerURL

MODULE = "tests_testing_hook_support"
# ``registry.testing_hook``, never imported by name: pytest would collect it as a test.


class _Base:
    def open(self, request: OpenRequest) -> MemoryLedger:
        return MemoryLedger(namespace=request.namespace)

    async def open_async(self, request: OpenRequest) -> Any:
        raise NotImplementedError


class Referenced(_Base):
    testing = f"{MODULE}:HOOKS"

    def local_faults(self, url: LedgerURL) -> None:  # the reference lacks it: this one answers
        return None


class MethodsOnly(_Base):
    def reroute(self, url: LedgerURL, route: Any) -> str:
        return "own"


class Neither(_Base):
    pass


SUPPORT = """
class _Hooks:
    def reroute(self, url, route):
        return "referenced"

    def remove_scratch(self, url, prefix):
        return 7


HOOKS = _Hooks()
"""


@pytest.fixture
def support(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The reference's module, importable by name and not yet imported."""
    (tmp_path / f"{MODULE}.py").write_text(SUPPORT)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, MODULE, raising=False)
    for scheme, backend in {"ref": Referenced(), "own": MethodsOnly(), "none": Neither()}.items():
        register_backend(scheme, backend)
    yield
    sys.modules.pop(MODULE, None)
    for scheme in ("ref", "own", "none", "broken"):
        _registered.pop(scheme, None)


def test_the_reference_is_imported_only_when_a_hook_is_asked_for(support: None) -> None:
    ledger: Any = open_ledger("ref://x", namespace="n")
    assert ledger.spend("r") is True
    assert MODULE not in sys.modules
    hook = registry.testing_hook("ref", "reroute")
    assert hook is not None
    assert hook(LedgerURL.parse("ref://x"), lambda h, p: (h, p)) == "referenced"
    assert MODULE in sys.modules
    remove = registry.testing_hook("REF", "remove_scratch")
    assert remove is not None
    assert remove(LedgerURL.parse("ref://x"), "p") == 7


def test_a_hook_the_reference_lacks_comes_from_the_backend(support: None) -> None:
    own = registry.testing_hook("ref", "local_faults")
    assert own is not None
    assert own.__self__.__class__ is Referenced  # type: ignore[attr-defined]


def test_methods_only_and_neither(support: None) -> None:
    hook = registry.testing_hook("own", "reroute")
    assert hook is not None
    assert hook(LedgerURL.parse("own://x"), lambda h, p: (h, p)) == "own"
    assert registry.testing_hook("own", "remove_scratch") is None
    assert registry.testing_hook("none", "reroute") is None
    assert registry.testing_hook("none", "local_faults") is None
    assert registry.testing_hook("none", "remove_scratch") is None


@pytest.mark.parametrize(
    ("reference", "error"),
    [
        ("tests_no_such_module_here:HOOKS", MissingDriver),
        (f"{MODULE}:NOT_THERE", BackendLoadError),
        ("no-colon", BackendLoadError),
        (42, BackendLoadError),
    ],
)
def test_a_broken_reference_is_an_error_naming_it(
    support: None, reference: object, error: type[Exception]
) -> None:
    broken = Neither()
    broken.testing = reference  # type: ignore[attr-defined]
    register_backend("broken", broken)
    with pytest.raises(error, match=r"the testing hooks of broken://"):
        registry.testing_hook("broken", "reroute")


def test_memory_scratch_removal_lives_behind_its_reference() -> None:
    sys.modules.pop("ledger_core.testing", None)
    ledger: Any = open_ledger("memory://testing-hook-memory", namespace="n")
    assert ledger.spend("r") is True
    assert "ledger_core.testing" not in sys.modules
    assert registry.testing_hook("memory", "remove_scratch") is not None
    assert "ledger_core.testing" in sys.modules
