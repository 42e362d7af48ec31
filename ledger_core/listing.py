"""One loop for every paged listing (``spent_ids``, ``namespaces``), sync and async.

A backend states its page primitive, ``fetch(cursor) -> (items, next cursor or None)``: one
operation of the store that reads a page and proves it. The first page is fetched from
``first`` (the backend's own start, ``None`` included); after it only ``None`` ends the
listing, and a missing or malformed page raises. Pages are streamed, never fetched ahead.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from typing import TypeVar

C = TypeVar("C")
T = TypeVar("T")


def pages(fetch: Callable[[C], tuple[Iterable[T], C | None]], first: C) -> Iterator[T]:
    items, cursor = fetch(first)
    while True:
        yield from items
        if cursor is None:
            return
        items, cursor = fetch(cursor)


async def pages_async(
    fetch: Callable[[C], Awaitable[tuple[Iterable[T], C | None]]], first: C
) -> AsyncIterator[T]:
    """An async generator: closing or cancelling it stops at the page being fetched."""
    items, cursor = await fetch(first)
    while True:
        for item in items:
            yield item
        if cursor is None:
            return
        items, cursor = await fetch(cursor)


__all__ = ["pages", "pages_async"]
