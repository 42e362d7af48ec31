"""Decisions written once, run by a sync or an async driver.

A backend writes what open, spend and is_spent *decide* as a generator of steps: it
yields one request for the store (a statement, a command, an API call's parameters),
receives the store's answer, or has the driver's exception thrown into it, and returns
the result. It does no I/O itself, so the same generator serves the sync ledger
(:func:`run_steps`) and the async one (:func:`run_steps_async`), and the two can never
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
