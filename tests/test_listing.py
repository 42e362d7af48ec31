"""``ledger_core.listing``: the one loop that drives a backend's page primitive."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Iterable
from typing import Any

import pytest

from ledger_core.listing import pages, pages_async

# cursor -> (items, next cursor): three pages, the middle one empty, then the end.
BOOK: dict[Any, tuple[list[str], Any]] = {
    None: (["a", "b"], 1),
    1: ([], 2),
    2: (["c"], None),
}


class Fetch:
    """A page primitive that records each cursor it is asked for."""

    def __init__(self, book: dict[Any, Any]) -> None:
        self.book = book
        self.asked: list[Any] = []

    def __call__(self, cursor: Any) -> Any:
        self.asked.append(cursor)
        return self.book[cursor]

    async def aio(self, cursor: Any) -> Any:
        await asyncio.sleep(0)
        return self(cursor)


def test_every_page_is_fetched_once_from_the_first_cursor_until_none() -> None:
    fetch = Fetch(BOOK)
    assert list(pages(fetch, None)) == ["a", "b", "c"]
    assert fetch.asked == [None, 1, 2]  # an empty page is not the end; None is


def test_pages_are_streamed_never_fetched_ahead() -> None:
    fetch = Fetch(BOOK)
    listed = pages(fetch, None)
    assert fetch.asked == []  # nothing before the first item is asked for
    assert next(listed) == "a"
    assert next(listed) == "b"
    assert fetch.asked == [None]
    assert next(listed) == "c"
    assert fetch.asked == [None, 1, 2]


@pytest.mark.parametrize("page", [None, ["a"], ("a", None, None), (None, None)])
def test_a_missing_or_malformed_page_raises_never_ends_the_listing(page: Any) -> None:
    book = {"start": (["x"], "next"), "next": page}
    with pytest.raises((TypeError, ValueError)):
        list(pages(Fetch(book), "start"))
    with pytest.raises((TypeError, ValueError)):
        asyncio.run(_collect(pages_async(Fetch(book).aio, "start")))


def test_a_failing_page_raises_through_the_listing() -> None:
    def fetch(cursor: int) -> tuple[Iterable[int], int | None]:
        if cursor:
            raise OSError("lost")
        return [1], 1

    listed = pages(fetch, 0)
    assert next(listed) == 1
    with pytest.raises(OSError, match="lost"):
        next(listed)


async def _collect(listed: Any) -> list[Any]:
    return [item async for item in listed]


def test_the_async_listing_is_an_async_generator_with_the_same_pages() -> None:
    fetch = Fetch(BOOK)
    listed = pages_async(fetch.aio, None)
    assert inspect.isasyncgen(listed)
    assert asyncio.run(_collect(listed)) == ["a", "b", "c"]
    assert fetch.asked == [None, 1, 2]


def test_cancelling_the_async_listing_stops_at_the_page_being_fetched() -> None:
    asked: list[int] = []
    started = asyncio.Event()

    async def fetch(cursor: int) -> tuple[list[int], int]:
        asked.append(cursor)
        if cursor:
            started.set()
            await asyncio.Event().wait()  # a page that never comes
        return [cursor], cursor + 1

    async def run() -> list[int]:
        got: list[int] = []

        async def consume() -> None:
            async for item in pages_async(fetch, 0):
                got.append(item)

        task = asyncio.create_task(consume())
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return got

    assert asyncio.run(run()) == [0]
    assert asked == [0, 1]
