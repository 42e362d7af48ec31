"""The shared socket watchdog (``ledger_core.watchdog``), without a store: a socket armed
past its time is shut (the read blocked on it wakes), one disarmed in time is not, and a
forked child gets a watchdog of its own. PostgreSQL and DynamoDB test it end to end."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
import threading
import time

import pytest

from ledger_core import watchdog


def test_a_socket_past_its_time_is_shut_and_the_blocked_read_wakes() -> None:
    dog = watchdog.Watchdog(idle=5.0)
    left, right = socket.socketpair()
    with left, right:
        started = time.monotonic()
        ticket = dog.arm(left, started + 0.2)  # a socket object, shut as it is
        assert left.recv(1) == b""  # blocks until shut: no reply would ever come
        assert time.monotonic() - started < 3.0
        assert dog.disarm(ticket) is True  # the deadline ended the operation
    dog.stop()


def test_a_file_descriptor_is_shut_and_one_disarmed_in_time_is_not() -> None:
    dog = watchdog.Watchdog(idle=5.0)
    first, first_peer = socket.socketpair()
    kept, kept_peer = socket.socketpair()
    with first, first_peer, kept, kept_peer:
        early = dog.arm(kept.fileno(), time.monotonic() + 0.1)
        assert dog.disarm(early) is False  # ended in time: never shut
        ticket = dog.arm(first.fileno(), time.monotonic() + 0.2)
        assert first.recv(1) == b""
        assert dog.disarm(ticket) is True
        assert dog._armed == {}  # nothing kept per operation
        assert dog._expired == set()
        kept_peer.sendall(b"x")
        assert kept.recv(1) == b"x"  # the disarmed socket still works
    dog.stop()


def test_the_loop_watchdog_shuts_a_socket_past_its_time() -> None:
    async def main() -> None:
        dog = watchdog.LoopWatchdog(idle=5.0)
        left, right = socket.socketpair()
        with left, right:
            left.setblocking(False)
            loop = asyncio.get_running_loop()
            started = time.monotonic()
            ticket = dog.arm(left.fileno(), started + 0.2)
            assert await asyncio.wait_for(loop.sock_recv(left, 1), 3.0) == b""
            assert dog.disarm(ticket) is True
            assert dog.disarm(dog.arm(left.fileno(), time.monotonic() + 60)) is False
        dog.stop()

    asyncio.run(main())


@pytest.mark.skipif(sys.platform == "win32", reason="fork")
def test_a_forked_child_gets_a_shared_watchdog_of_its_own() -> None:
    """Forked while another thread holds the parent's lock: the child's arm must not wait
    for it (nor for a thread the child does not have)."""
    parent = watchdog.shared
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with parent._lock:
            held.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(10)
    try:
        pid = os.fork()
        if pid == 0:  # the child: exit 0 only if its arm/disarm works at once
            code = 1
            try:
                signal.alarm(10)  # a child stuck on the parent's lock dies, not hangs
                left, _right = socket.socketpair()
                fresh = watchdog.shared is not parent
                ticket = watchdog.shared.arm(left, time.monotonic() + 60)
                code = 0 if fresh and watchdog.shared.disarm(ticket) is False else 1
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
    finally:
        release.set()
        holder.join()
    assert os.waitstatus_to_exitcode(status) == 0
