"""A third party's ``module:attribute`` reference (a backend's entry point, its
``testing`` hooks) that does not load says what is wrong with it.

Before: a typo in the module name suggested ``pip install 'decision-ledger[all]'``, which
cannot fix it; only a driver missing under one of this distribution's own packages is
fixed by an extra.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ledger_core import registry
from ledger_core.errors import BackendLoadError, MissingDriver

MODULE = "acme_reference_typos"


@pytest.fixture
def acme(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """``acme_reference_typos`` (it has ``BACKEND``) and ``acme_needs_driver`` (its
    import needs a module that is not installed)."""
    (tmp_path / f"{MODULE}.py").write_text("BACKEND = object()\n")
    (tmp_path / "acme_needs_driver.py").write_text("import acme_driver_not_installed\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    for name in (MODULE, "acme_needs_driver"):
        sys.modules.pop(name, None)


@pytest.mark.parametrize(
    ("reference", "said"),
    [
        (f"{MODULE}_typo:BACKEND", f"module '{MODULE}_typo' was not found"),
        (f"{MODULE}.sub:BACKEND", f"module '{MODULE}.sub' was not found"),
        (f"{MODULE}:BACKND", "check the spelling of 'BACKND' in the reference"),
    ],
)
def test_a_typo_is_named_as_one(acme: None, reference: str, said: str) -> None:
    for where, load in (
        ("entry point", lambda: registry._load("acme", "acme", reference, _loader(reference))),
        (
            "testing hooks",
            lambda: registry._import("hooks", lambda: _resolve(reference), reference),
        ),
    ):
        with pytest.raises(BackendLoadError) as caught:
            load()
        assert said in str(caught.value), where
        assert "decision-ledger[" not in str(caught.value), where


def test_a_third_party_dependency_missing_names_it_not_our_extra(acme: None) -> None:
    reference = "acme_needs_driver:BACKEND"
    with pytest.raises(MissingDriver) as caught:
        registry._import("hooks", lambda: _resolve(reference), reference)
    assert "acme_driver_not_installed" in str(caught.value)
    assert "install what 'acme_needs_driver' needs" in str(caught.value)
    assert "decision-ledger[" not in str(caught.value)


def test_only_our_own_packages_get_the_extra() -> None:
    assert registry._ours("ledger_redis.backend")
    assert not registry._ours(MODULE)


def _resolve(reference: str) -> object:
    return registry._resolve(reference)


def _loader(reference: str) -> Callable[[], Any]:
    from importlib.metadata import EntryPoint

    return EntryPoint("acme", reference, registry.ENTRY_POINT_GROUP).load
