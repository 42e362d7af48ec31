"""Lazy drivers for backend packages: ``import ledger_redis`` must not import redis-py.

A backend's ``__init__`` names its ledger classes and the modules that hold them; the
modules (and their drivers) are imported on first attribute access, the way PEP 562
allows, and a driver only when a ledger is opened (:func:`import_driver`), written once
here instead of once per backend.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

from .errors import MissingDriver


def lazy_exports(
    package: str, where: Mapping[str, str], before: Callable[[], object] | None = None
) -> Callable[[str], Any]:
    """A module ``__getattr__`` that imports ``where[name]`` (relative to ``package``)
    on first use and returns its ``name``; ``before`` runs first (a driver check)."""

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        if before is not None:
            before()
        return getattr(importlib.import_module(module, package), name)

    return __getattr__


def import_driver(extra: str, needs: str, *modules: str) -> ModuleType:
    """The first of ``modules``, each imported now, or :class:`MissingDriver` saying what
    ``needs`` them and the ``decision-ledger[extra]`` that installs them."""
    try:
        loaded = [importlib.import_module(name) for name in modules]
    except ImportError as exc:
        raise MissingDriver(f"{needs}: pip install 'decision-ledger[{extra}]'") from exc
    return loaded[0]


__all__ = ["import_driver", "lazy_exports"]
