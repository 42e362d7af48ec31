"""Lazy exports for backend packages: ``import ledger_redis`` must not import redis-py.

A backend's ``__init__`` names its ledger classes and the modules that hold them; the
modules (and their drivers) are imported on first attribute access, the way PEP 562
allows, written once here instead of once per backend.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, where: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` that imports ``where[name]`` (relative to ``package``)
    on first use and returns its ``name``."""

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module, package), name)

    return __getattr__


__all__ = ["lazy_exports"]
