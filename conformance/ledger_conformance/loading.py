"""Resolve ``--ledger-factory package.module:callable`` into a callable, or say why not."""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

# What each path loaded to: a freshly spawned interpreter is told the path, the one sure
# way to rebuild a factory that neither pickles nor has a name in its own module (a
# closure a helper made and the module bound to another name).
_loaded: dict[int, tuple[object, str]] = {}


def path_of(factory: object) -> str | None:
    """The ``module:callable`` path ``factory`` was loaded from in this process, if any."""
    found = _loaded.get(id(factory))
    return found[1] if found is not None and found[0] is factory else None


class FactoryPathError(ValueError):
    """The factory path is malformed, or its module or attribute cannot be loaded."""


def load_factory(path: str) -> Any:
    """The callable named by ``package.module:callable`` (dots after ``:`` walk attributes).

    Also loads ``--ledger-restart`` hooks, which follow the same form.
    """
    module_name, sep, attr_path = path.partition(":")
    if not sep or not module_name or not attr_path:
        raise FactoryPathError(f"factory {path!r}: expected package.module:callable")
    if os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())  # like `python -m`: a factory module in the project dir
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise FactoryPathError(
            f"factory {path!r}: cannot import module {module_name!r} ({exc})"
        ) from exc
    for attr in attr_path.split("."):
        try:
            target = getattr(target, attr)
        except AttributeError:
            raise FactoryPathError(
                f"factory {path!r}: module {module_name!r} has no {attr_path!r}"
            ) from None
    if not callable(target):
        raise FactoryPathError(f"factory {path!r} is not callable")
    _loaded[id(target)] = (target, path)
    return target
