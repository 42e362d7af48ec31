"""Lost replies resolved inside the call, on a real server and without a sleep.

The shipped ``FaultProxy`` drops a reply (``RESET_AFTER_REQUEST``); the ledger then
retries at once on a new connection. To test "the retry finds the write", the proxy must
heal between the two, so the ledger here runs on a host's pool whose next borrow the test
can hold (:class:`Gate`): the loss happens, the test heals the proxy, then opens the gate.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import redis
import redis.asyncio

from ledger_conformance.faults import FaultProxy, Toxic
from ledger_redis import AsyncRedisLedger, RedisLedger
from tests.flavors import Flavored

WAIT = 30.0  # seconds a held borrow or the test waits for the other side (never reached)


class Gate:
    """Lets ``passes`` borrows through, then holds the next one until :meth:`open`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._passes: int | None = None
        self._opened = threading.Event()

    def hold_after(self, passes: int) -> None:
        with self._lock:
            self._passes = passes
            self._opened.clear()

    def open(self) -> None:
        self._opened.set()

    def turn(self) -> None:
        with self._lock:
            if self._passes is None:
                return
            if self._passes > 0:
                self._passes -= 1
                return
            self._passes = None
        if not self._opened.wait(WAIT):
            raise RuntimeError("the test never opened the gate")


class _HeldPool(redis.BlockingConnectionPool):
    gate: Gate

    def get_connection(self, *args: Any, **kwargs: Any) -> Any:
        self.gate.turn()
        return super().get_connection(*args, **kwargs)  # type: ignore[no-untyped-call]


class _AsyncHeldPool(redis.asyncio.BlockingConnectionPool):
    gate: Gate

    async def get_connection(self, *args: Any, **kwargs: Any) -> Any:
        await asyncio.to_thread(self.gate.turn)
        return await super().get_connection(*args, **kwargs)  # type: ignore[no-untyped-call]


class Held(Flavored):
    """A sync or async ledger (sync face) on a pool through ``proxy``, with its gate."""

    def __init__(self, flavor: str, proxy: FaultProxy, namespace: str) -> None:
        self.flavor = flavor
        self.loop = None if flavor == "sync" else asyncio.new_event_loop()
        self.gate = Gate()
        host, port = proxy.address
        pool_type = _HeldPool if flavor == "sync" else _AsyncHeldPool
        self.pool: Any = pool_type(host=host, port=port, socket_timeout=5, timeout=5)
        self.pool.gate = self.gate
        self.proxy = proxy
        ledger_type: Any = RedisLedger if flavor == "sync" else AsyncRedisLedger
        self.ledger = self.run(ledger_type.from_client(self.pool, namespace=namespace))
        # A ledger made by from_client checks for an unfinished migration before its first
        # answer: that read is done here, so the first trip a test loses is its own call's.
        self.is_spent("held: the first answer's migration check")

    def lose_one_reply(self, call: Callable[[], Any]) -> Any:
        """Run ``call`` while the proxy drops exactly one reply (the first trip's): the
        retry inside the call is held until the proxy has healed."""
        dropped = self.proxy.stats.replies_dropped
        self.proxy.set(Toxic.RESET_AFTER_REQUEST)
        self.gate.hold_after(1)
        outcome: list[Any] = []

        def run() -> None:
            try:
                outcome.append(call())
            except BaseException as exc:  # handed to the test thread below
                outcome.append(exc)

        worker = threading.Thread(target=run)
        worker.start()
        try:
            assert self.proxy.wait_reply_dropped(WAIT), "no reply was dropped"
            self.proxy.heal()
        finally:
            self.gate.open()
            worker.join(WAIT)
        assert not worker.is_alive()
        assert self.proxy.stats.replies_dropped == dropped + 1
        if isinstance(outcome[0], BaseException):
            raise outcome[0]
        return outcome[0]

    def __enter__(self) -> Held:
        return self

    def dispose(self) -> None:
        """Close the ledger, then the host's pool (the ledger never closes it), then the loop."""
        try:
            self.close()
            self.run(self.pool.disconnect())
        finally:
            if self.loop is not None:
                self.loop.close()
