"""The restart hook, and the wait for the store to serve again after it returns.

A hook may return before the store serves: ``redis-server`` answers ``LOADING`` while it
reads its data back, a database replays its log. A ledger that raises then fails closed,
as it must; its errors are the hook's doing only while the store was not ready. So after
the hook returns, the suite waits (bounded) until a new instance reads, and says so when
it had to; reads that fail after that are the ledger's.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from ..harness import CALL_BOUND, Ledgers, error_text
from .common import note

SERVE_BOUND = CALL_BOUND  # seconds the store may take to serve after the hook returns
POLL = 0.1  # seconds between two tries while it does not


def run_restart(ledgers: Ledgers, hook: Callable[[], object]) -> float:
    """Run the restart hook (one that fails fails the test, with its output); the
    monotonic time it returned."""
    try:
        hook()
    except Exception as exc:
        pytest.fail(f"the restart hook failed: {error_text(exc)}", pytrace=False)
    return time.monotonic()


def wait_until_serving(
    ledgers: Ledgers,
    label: str,
    spent_id: str,
    returned: float,
    request: pytest.FixtureRequest,
) -> None:
    """Wait until a new instance on ``label`` answers a read of ``spent_id`` (whatever it
    answers: a wrong answer is the clause's to judge), at most :data:`SERVE_BOUND` after
    the hook ``returned``. A wait is noted; a store that never served fails the test
    naming the hook, not the ledger."""
    last: Exception | None = None
    while True:
        try:
            handle = ledgers.open(label)
        except Exception as exc:
            last = exc
        else:
            try:
                handle.reads_spent(spent_id)
                break
            except Exception as exc:
                last = exc
            finally:
                ledgers.close_handle(handle)  # one probe open at a time
        waited = time.monotonic() - returned
        if waited > SERVE_BOUND:
            pytest.fail(
                f"the restart hook returned before the store served again: for {waited:.0f} s "
                f"after it returned, no new instance could read (last: {error_text(last)}). "
                "Make the hook return only once the store serves (Redis: once PING answers "
                "PONG, not LOADING; a database: once it accepts queries); if it does, the "
                "ledger cannot reach a restarted store",
                pytrace=False,
            )
        time.sleep(POLL)  # a bounded poll of the store's readiness, not a race's fix
    if last is not None:
        note(
            request,
            f"the restart hook returned {time.monotonic() - returned:.1f} s before the store "
            f"served again (until then: {error_text(last)}); the suite waited. Make the hook "
            "return only once the store serves",
        )
