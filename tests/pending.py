"""A suite clause a backend is known to fail until its fix lands: on that backend's test
class alone, its failure is reported as xfailed (so CI stays green), and a pass fails
(strict: the mark must go the day the fix lands)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import pytest


def pending(
    test: Callable[..., Any],
    reason: str,
    *,
    when: Mapping[str, object] | None = None,
    strict: bool = True,
) -> Callable[..., Any]:
    """A copy of the inherited clause test ``test`` (its marks kept, the base class's
    function untouched) whose clause failure (an AssertionError) is an xfail. ``when``:
    only for these parameter values; ``strict=False``: a pass is fine too (a race the
    clause catches only sometimes)."""

    @functools.wraps(test)
    def copy(*args: Any, **kwargs: Any) -> Any:
        if when is not None and any(kwargs.get(k) != v for k, v in when.items()):
            return test(*args, **kwargs)
        try:
            test(*args, **kwargs)
        except AssertionError:
            pytest.xfail(f"pending: {reason}")
        if strict:
            pytest.fail(f"passes now: remove the pending mark ({reason})", pytrace=False)

    copy.pytestmark = list(getattr(test, "pytestmark", []))  # type: ignore[attr-defined]
    return copy


__all__ = ["pending"]
