"""C10 re-entry checks that every backend's tests run on its real server (sync and
async through :class:`~tests.flavors.Flavored`): the same key re-enters, any other key
and a plain spend's record are refused, and of racing attempts exactly one wins."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from tests.flavors import Flavored

KEYS = [f"attempt-{i:02d}-0123456789abcdef" for i in range(16)]


def spend_as(ledger: Flavored, request_id: str, key: str) -> bool:
    result: bool = ledger.run(ledger.ledger.spend_as(request_id, key))
    return result


def check_reentry(ledger: Flavored) -> None:
    """The clause's answers, one call at a time."""
    assert spend_as(ledger, "won", KEYS[0]) is True
    assert spend_as(ledger, "won", KEYS[0]) is True  # the winner re-enters
    assert spend_as(ledger, "won", KEYS[1]) is False  # another attempt is refused
    assert ledger.spend("won") is False
    assert ledger.is_spent("won") is True
    assert spend_as(ledger, "won", KEYS[0]) is True  # still, after the plain spend
    assert ledger.spend("plain") is True
    assert spend_as(ledger, "plain", KEYS[0]) is False  # a plain spend has no holder
    assert spend_as(ledger, "plain", KEYS[0]) is False
    assert ledger.is_spent("never") is False
    assert {"won", "plain"} <= set(ledger.spent_ids())


def _race_threads(ledger: Any, request_id: str) -> dict[str, bool | BaseException]:
    barrier = threading.Barrier(len(KEYS))
    results: dict[str, bool | BaseException] = {}

    def attempt(key: str) -> None:
        barrier.wait()
        try:
            results[key] = ledger.spend_as(request_id, key)
        except BaseException as exc:  # reported below, never swallowed
            results[key] = exc

    threads = [threading.Thread(target=attempt, args=(key,)) for key in KEYS]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


async def _race_tasks(ledger: Any, request_id: str) -> dict[str, bool | BaseException]:
    go = asyncio.Event()  # asyncio.Barrier is 3.11+: every task waits, the last releases
    waiting = [0]

    async def attempt(key: str) -> bool:
        waiting[0] += 1
        if waiting[0] == len(KEYS):
            go.set()
        await go.wait()
        result: bool = await ledger.spend_as(request_id, key)
        return result

    answers = await asyncio.gather(*(attempt(k) for k in KEYS), return_exceptions=True)
    return dict(zip(KEYS, answers, strict=True))


def check_race(ledger: Flavored, rounds: int) -> None:
    """16 attempts under distinct keys released at once on each of ``rounds`` ids:
    exactly one ``True`` each time, and then only that key re-enters."""
    for n in range(rounds):
        request_id = f"race-{n}"
        if ledger.loop is None:
            results = _race_threads(ledger.ledger, request_id)
        else:
            results = ledger.run(_race_tasks(ledger.ledger, request_id))
        errors = [r for r in results.values() if isinstance(r, BaseException)]
        assert not errors, errors
        winners = [key for key, won in results.items() if won is True]
        assert len(winners) == 1, (request_id, results)
        assert spend_as(ledger, request_id, winners[0]) is True
        loser = next(key for key in KEYS if key != winners[0])
        assert spend_as(ledger, request_id, loser) is False


def namespaces(ledger: Flavored) -> list[str]:
    """The whole ``namespaces()`` listing (sync iterator or async iterator alike)."""
    return ledger.collect(ledger.ledger.namespaces())
