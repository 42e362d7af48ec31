"""Decisions written once, run by a sync or an async driver.

A decision is a generator: it yields one request for the store, receives the answer (or
has the driver's exception thrown in) and returns the result, with no I/O of its own, so
the sync ledger (:func:`run_steps`) and the async one (:func:`run_steps_async`) can never
decide differently (C9). psycopg's ``generators.py``/``waiting.py`` split is the model.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from typing import Any, TypeVar

R = TypeVar("R")
Req = TypeVar("Req")

Steps = Generator[Req, Any, R]


def run_steps(steps: Generator[Req, Any, R], perform: Callable[[Req], Any]) -> R:
    """Drive ``steps`` to its end with a blocking ``perform(request) -> answer``."""
    try:
        request = next(steps)
        while True:
            try:
                answer = perform(request)
            except Exception as exc:
                request = steps.throw(exc)
            else:
                request = steps.send(answer)
    except StopIteration as done:
        result: R = done.value
        return result


async def run_steps_async(
    steps: Generator[Req, Any, R], perform: Callable[[Req], Awaitable[Any]]
) -> R:
    """Drive ``steps`` to its end with an awaitable ``perform(request) -> answer``."""
    try:
        request = next(steps)
        while True:
            try:
                answer = await perform(request)
            except Exception as exc:
                request = steps.throw(exc)
            else:
                request = steps.send(answer)
    except StopIteration as done:
        result: R = done.value
        return result


__all__ = ["Steps", "run_steps", "run_steps_async"]
