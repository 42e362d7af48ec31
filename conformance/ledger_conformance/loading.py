"""Resolve ``--ledger-factory package.module:callable`` into a callable, or say why not."""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any


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
    return target
