"""An asyncio TCP fault proxy (toxiproxy-like) for the conformance suite's failure tests.

A :class:`Toxic` decides, chunk by chunk and at once for existing connections, what
happens to the bytes. The proxy runs its own loop in a daemon thread, so sync and async
tests drive it the same way; every control method blocks until the change is applied.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import enum
import functools
import math
import socket
import struct
import sys
import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

__all__ = ["FaultProxy", "ProxyRouter", "ProxyStats", "Toxic"]

_CHUNK = 65536
_CONNECT_TIMEOUT = 5.0  # seconds to reach the upstream before the client is reset
_CONTROL_TIMEOUT = 10.0  # seconds a control call may wait for the proxy's loop
_JOIN_TIMEOUT = 10.0
_BACKLOG = 128
_RST = struct.pack("ii", 1, 0)

T = TypeVar("T")


class Toxic(enum.Enum):
    """What the proxy does to traffic (see ``docs/faults.md``)."""

    PASS = "pass"
    """Forward both ways."""
    REFUSE = "refuse"
    """Stop listening (new connects get ECONNREFUSED) and reset existing connections."""
    RESET = "reset"
    """RST every connection, existing and new (new ones are accepted, then reset)."""
    LATENCY = "latency"
    """Delay every chunk by ``latency`` seconds, both ways."""
    BLACKHOLE = "blackhole"
    """Accept, read and discard everything; never reply, never close."""
    DROP_REPLIES = "drop_replies"
    """Forward requests, discard replies: the request landed, the answer is lost."""
    RESET_AFTER_REQUEST = "reset_after_request"
    """Forward requests; when a reply arrives, discard it and RST the client."""
    TRICKLE = "trickle"
    """Forward requests; send each reply a byte at a time, one every ``latency`` seconds
    (a server that never goes quiet long enough to trip a per-read timeout)."""
    HOLD = "hold"
    """Hold every request chunk, in order, until :meth:`FaultProxy.let_through` lets one
    on or the toxic changes (then each goes on under the new toxic); replies pass. A
    request in flight, stopped where the suite chooses (C6: a forget lands meanwhile)."""
    PARTIAL_WRITE = "partial_write"
    """Forward only the first half of a request chunk, then RST the client and close the
    upstream: the server gets a truncated command it must discard (a sender dying mid-send)."""


@dataclass(frozen=True)
class ProxyStats:
    """Counters since start: connections accepted, bytes handed on each way (discarded
    ones not counted), replies dropped (in chunks)."""

    accepted: int = 0
    bytes_up: int = 0
    bytes_down: int = 0
    replies_dropped: int = 0


class _Abort(Exception):
    """Ends a connection with a RST to the client."""


@dataclass(eq=False)
class _Link:
    """One client connection and its upstream."""

    client: socket.socket
    upstream: socket.socket | None = None
    task: asyncio.Task[None] | None = None
    dropped_reply: bool = False
    pumps: list[asyncio.Task[None]] = field(default_factory=list)


def _reset(sock: socket.socket) -> None:
    """Close with a RST instead of a FIN."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _RST)
    sock.close()


def _checked(toxic: Toxic, latency: float) -> float:
    if not isinstance(toxic, Toxic):
        raise TypeError(f"expected a Toxic, got {toxic!r}")
    if not isinstance(latency, (int, float)) or not math.isfinite(latency) or latency < 0:
        raise ValueError(f"latency must be a finite number of seconds >= 0, got {latency!r}")
    return float(latency)


class _Controls:
    """What a proxy and a router share: healing, ``with``."""

    def set(self, toxic: Toxic, *, latency: float = 0.0) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def heal(self) -> None:
        self.set(Toxic.PASS)

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class FaultProxy(_Controls):
    """A TCP proxy from ``address`` to one upstream, with a switchable :class:`Toxic`."""

    def __init__(
        self,
        upstream_host: str,
        upstream_port: int,
        *,
        held_signal: threading.Condition | None = None,
    ) -> None:
        self._upstream = (upstream_host, upstream_port)
        # HOLD: chunks waiting (counted under held_signal, notified on every change) and
        # how many more may pass; the gate lives on the loop.
        self.held_signal = held_signal or threading.Condition()
        self._held = 0
        self._allowance = 0
        self._gate = asyncio.Condition()  # bound to the proxy's loop on first use
        self._toxic = Toxic.PASS
        self._latency = 0.0
        # Replaced (never cleared) on every set(), on the loop thread together with the
        # toxic, so a drop always signals the events of the toxic it happened under.
        self._drop_events: tuple[threading.Event, ...] = (threading.Event(),)
        self._extra_events: tuple[threading.Event, ...] = ()
        self._control = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._listener: socket.socket | None = None
        self._listening = False
        self._accept_task: asyncio.Task[None] | None = None
        self._links: set[_Link] = set()
        self._address: tuple[str, int] | None = None
        self._stopped = False
        self._accepted = self._bytes_up = self._bytes_down = self._replies_dropped = 0

    # -- lifecycle ----------------------------------------------------------------------

    def start(self) -> None:
        """Bind, listen (unless set to REFUSE) and start the loop thread. Idempotent."""
        with self._control:
            if self._stopped:
                raise RuntimeError("a stopped FaultProxy cannot be restarted")
            if self._loop is not None:
                return
            self._listener = self._bind()
            host, port = self._listener.getsockname()[:2]
            self._address = (host, port)
            loop = asyncio.new_event_loop()
            thread = threading.Thread(
                target=self._run_loop, args=(loop,), name=f"fault-proxy-{port}", daemon=True
            )
            self._loop, self._thread = loop, thread
            thread.start()
            self._call(self._apply(self._toxic, self._latency, self._extra_events, starting=True))

    def stop(self) -> None:
        """Reset every connection, close the listener, stop and join the loop thread."""
        with self._control:
            if self._stopped:
                return
            self._stopped = True
            loop, thread = self._loop, self._thread
            if loop is None or thread is None:
                return
            try:
                self._call(self._shutdown())
            finally:
                loop.call_soon_threadsafe(loop.stop)
                thread.join(_JOIN_TIMEOUT)
                if not thread.is_alive():
                    loop.close()
                if self._listener is not None:
                    self._listener.close()

    close = stop

    def __enter__(self) -> FaultProxy:
        self.start()
        return self

    def __repr__(self) -> str:
        where = "unstarted" if self._address is None else f"{self._address[0]}:{self._address[1]}"
        host, port = self._upstream
        return f"FaultProxy({where} -> {host}:{port}, {self._toxic.value})"

    # -- control ------------------------------------------------------------------------

    @property
    def address(self) -> tuple[str, int]:
        """Where clients connect; the same for the proxy's whole life (REFUSE included)."""
        if self._address is None:
            raise RuntimeError("start() the FaultProxy first")
        return self._address

    @property
    def upstream(self) -> tuple[str, int]:
        return self._upstream

    @property
    def toxic(self) -> Toxic:
        return self._toxic

    @property
    def stats(self) -> ProxyStats:
        return ProxyStats(self._accepted, self._bytes_up, self._bytes_down, self._replies_dropped)

    def set(self, toxic: Toxic, *, latency: float = 0.0) -> None:
        """Switch the toxic; applied to new and existing connections before this returns."""
        self._set(toxic, latency, ())

    def reset_connections(self) -> None:
        """RST every open connection now (the toxic stays as it is)."""
        with self._control:
            if self._running():
                self._call(self._reset_all())

    @property
    def held(self) -> int:
        """Request chunks waiting under HOLD now (not counting those let through)."""
        with self.held_signal:
            return self._waiting()

    def let_through(self, count: int = 1) -> None:
        """Under HOLD: let the next ``count`` request chunks on, in order."""
        with self._control:
            if self._running():
                self._call(self._open_gate(count))

    def wait_reply_dropped(self, timeout: float) -> bool:
        """True once a server reply was dropped under the toxic of the last ``set()``."""
        return self._drop_events[0].wait(timeout)

    def _set(self, toxic: Toxic, latency: float, extra: tuple[threading.Event, ...]) -> None:
        latency = _checked(toxic, latency)
        with self._control:
            if self._stopped:
                raise RuntimeError("the FaultProxy is stopped")
            if self._running():
                self._call(self._apply(toxic, latency, extra))
            else:  # applied by start()
                self._toxic, self._latency, self._extra_events = toxic, latency, extra
                self._drop_events = (threading.Event(), *extra)

    # -- the loop thread ----------------------------------------------------------------

    def _running(self) -> bool:
        return self._loop is not None and not self._stopped

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        loop = self._loop
        assert loop is not None
        if self._thread is threading.current_thread():
            coro.close()
            raise RuntimeError("FaultProxy controls cannot be called from its own loop")
        return asyncio.run_coroutine_threadsafe(coro, loop).result(_CONTROL_TIMEOUT)

    @staticmethod
    def _run_loop(loop: asyncio.AbstractEventLoop) -> None:
        asyncio.set_event_loop(loop)
        loop.run_forever()
        # What stop() could not wait for ends here, before the loop closes: a task left
        # pending would run its finally on a closed loop when collected.
        tasks = asyncio.all_tasks(loop)
        for task in tasks:
            task.cancel()
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))

    def _bind(self) -> socket.socket:
        family, kind, proto, _, addr = socket.getaddrinfo("127.0.0.1", 0, type=socket.SOCK_STREAM)[
            0
        ]
        # Bind the listener to an explicit port (found by a probe socket sharing it with
        # SO_REUSEADDR): Linux then keeps the port through an "unlisten" (see _unlisten).
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(addr)
            port = probe.getsockname()[1]
            sock = socket.socket(family, kind, proto)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((addr[0], port, *addr[2:]))
            except OSError:
                sock.close()
                raise
        sock.setblocking(False)
        return sock

    async def _apply(
        self,
        toxic: Toxic,
        latency: float,
        extra: tuple[threading.Event, ...],
        *,
        starting: bool = False,
    ) -> None:
        previous = self._toxic
        self._toxic, self._latency, self._extra_events = toxic, latency, extra
        self._drop_events = (threading.Event(), *extra)
        with self.held_signal:
            self._allowance = 0
        await self._open_gate(0)  # held chunks go on under the new toxic
        if toxic is Toxic.REFUSE:
            await self._unlisten()
            await self._reset_all()
        elif starting or previous is Toxic.REFUSE:
            self._listen()
        if toxic is Toxic.RESET:
            await self._reset_all()

    def _listen(self) -> None:
        if self._listening:
            return
        listener = self._listener
        assert listener is not None
        listener.listen(_BACKLOG)
        self._listening = True
        self._accept_task = asyncio.get_running_loop().create_task(self._accept_loop(listener))

    async def _unlisten(self) -> None:
        """Stop listening but keep the port, so PASS listens again on the same one."""
        task, self._accept_task = self._accept_task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        if not self._listening:
            return
        self._listening = False
        listener = self._listener
        assert listener is not None
        try:
            # Linux: shutdown(SHUT_RD) on a listening socket disconnects it (the accept
            # queue is reset) but keeps an explicitly bound port; listen() revives it.
            listener.shutdown(socket.SHUT_RD)
        except OSError:
            # Elsewhere: close and re-bind the same port without listening.
            addr = listener.getsockname()
            listener.close()
            fresh = socket.socket(listener.family, listener.type, listener.proto)
            fresh.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            fresh.bind(addr)
            fresh.setblocking(False)
            self._listener = fresh

    async def _accept_loop(self, listener: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                client, _ = await loop.sock_accept(listener)
            except ConnectionAbortedError:
                continue
            except OSError:
                return  # the listener is gone; REFUSE or stop() is in charge
            client.setblocking(False)
            self._accepted += 1
            link = _Link(client)
            self._links.add(link)
            link.task = loop.create_task(self._serve(link))
            # A task cancelled before its first step never runs its finally: clean up here.
            link.task.add_done_callback(functools.partial(self._forget, link))

    def _forget(self, link: _Link, _task: asyncio.Task[None]) -> None:
        if link in self._links:
            self._links.discard(link)
            _reset(link.client)
            if link.upstream is not None:
                link.upstream.close()

    async def _reset_all(self) -> None:
        tasks = [link.task for link in self._links if link.task is not None]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=_CONTROL_TIMEOUT / 2)

    async def _shutdown(self) -> None:
        await self._unlisten()
        await self._reset_all()
        # getaddrinfo ran in the loop's executor: join its threads too.
        await asyncio.get_running_loop().shutdown_default_executor()

    async def _serve(self, link: _Link) -> None:
        """Connect upstream and pump both ways until both sides finish or a fault ends it."""
        loop = asyncio.get_running_loop()
        graceful = False
        try:
            if self._toxic in (Toxic.RESET, Toxic.REFUSE):
                return
            if sys.version_info >= (3, 11):
                async with asyncio.timeout(_CONNECT_TIMEOUT):
                    link.upstream = await self._connect_upstream()
            else:  # wait_for may swallow a cancel that meets the connect: _run_loop ends it
                link.upstream = await asyncio.wait_for(self._connect_upstream(), _CONNECT_TIMEOUT)
            for sock in (link.client, link.upstream):
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            link.pumps = [
                loop.create_task(self._pump(link, link.client, link.upstream, upward=True)),
                loop.create_task(self._pump(link, link.upstream, link.client, upward=False)),
            ]
            await asyncio.gather(*link.pumps)
            graceful = True
        except (OSError, asyncio.TimeoutError, _Abort):
            pass
        finally:
            for pump in link.pumps:
                pump.cancel()
            await asyncio.gather(*link.pumps, return_exceptions=True)
            if graceful:
                link.client.close()
            else:
                _reset(link.client)
            if link.upstream is not None:
                link.upstream.close()
            self._links.discard(link)
            if link.dropped_reply:
                self._signal_drop()

    async def _connect_upstream(self) -> socket.socket:
        loop = asyncio.get_running_loop()
        host, port = self._upstream
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        family, kind, proto, _, addr = infos[0]
        sock = socket.socket(family, kind, proto)
        sock.setblocking(False)
        try:
            await loop.sock_connect(sock, addr)
        except BaseException:
            sock.close()
            raise
        return sock

    async def _pump(
        self, link: _Link, src: socket.socket, dst: socket.socket, *, upward: bool
    ) -> None:
        loop = asyncio.get_running_loop()
        while True:
            data = await loop.sock_recv(src, _CHUNK)
            if not data:
                if self._toxic is not Toxic.BLACKHOLE:  # a blackhole never closes
                    with contextlib.suppress(OSError):
                        dst.shutdown(socket.SHUT_WR)
                return
            if self._toxic is Toxic.LATENCY and self._latency > 0:
                await asyncio.sleep(self._latency)  # chunks stay in order, each held back
            await self._deliver(link, dst, data, upward=upward)

    async def _open_gate(self, count: int) -> None:
        with self.held_signal:
            self._allowance += count
        async with self._gate:
            self._gate.notify_all()

    def _waiting(self) -> int:
        """Chunks held and not yet let through (call under ``held_signal``)."""
        return max(0, self._held - self._allowance)

    async def _pass_gate(self) -> None:
        """Under HOLD, wait until this chunk may go on (let through, or the toxic changed)."""
        if self._toxic is not Toxic.HOLD:
            return
        with self.held_signal:
            self._held += 1
            self.held_signal.notify_all()
        allowed = False
        try:
            async with self._gate:
                await self._gate.wait_for(
                    lambda: self._toxic is not Toxic.HOLD or self._allowance > 0
                )
                allowed = self._toxic is Toxic.HOLD
        finally:
            with self.held_signal:
                self._held -= 1
                if allowed:
                    self._allowance -= 1
                self.held_signal.notify_all()

    async def _deliver(self, link: _Link, dst: socket.socket, data: bytes, *, upward: bool) -> None:
        """Apply the toxic in force now (it may have changed while the chunk waited)."""
        if upward:
            await self._pass_gate()
        toxic = self._toxic
        if toxic in (Toxic.RESET, Toxic.REFUSE):
            raise _Abort
        if toxic is Toxic.BLACKHOLE:
            return
        if upward and toxic is Toxic.PARTIAL_WRITE:
            part = data[: len(data) // 2] if len(data) > 1 else b""
            self._bytes_up += len(part)
            if part:
                await asyncio.get_running_loop().sock_sendall(dst, part)
            raise _Abort  # the upstream is closed too: the command stays cut
        if not upward and toxic in (Toxic.DROP_REPLIES, Toxic.RESET_AFTER_REQUEST):
            self._replies_dropped += 1
            if toxic is Toxic.DROP_REPLIES:
                self._signal_drop()
                return
            link.dropped_reply = True  # signalled once the client has been reset
            raise _Abort
        if not upward and toxic is Toxic.TRICKLE:
            await self._trickle(link, dst, data)
            return
        # Counted before sending, so a peer that has the bytes also sees them counted.
        if upward:
            self._bytes_up += len(data)
        else:
            self._bytes_down += len(data)
        await asyncio.get_running_loop().sock_sendall(dst, data)

    async def _trickle(self, link: _Link, dst: socket.socket, data: bytes) -> None:
        """One byte every ``latency`` seconds while TRICKLE lasts; the rest of the chunk
        under whatever toxic replaced it."""
        loop = asyncio.get_running_loop()
        for n in range(len(data)):
            if self._toxic is not Toxic.TRICKLE:
                await self._deliver(link, dst, data[n:], upward=False)
                return
            self._bytes_down += 1
            await loop.sock_sendall(dst, data[n : n + 1])
            await asyncio.sleep(self._latency)

    def _signal_drop(self) -> None:
        for event in self._drop_events:
            event.set()


class ProxyRouter(_Controls):
    """The ``route`` a LedgerContext hands to a ledger factory: one proxy per upstream
    the factory asks for, every one driven at once with :meth:`set`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proxies: dict[tuple[str, int], FaultProxy] = {}
        self._toxic = Toxic.PASS
        self._latency = 0.0
        self._dropped = threading.Event()
        self.held_signal = threading.Condition()  # shared by every proxy (HOLD)
        self._used = False
        self._closed = False

    def __call__(self, host: str, port: int) -> tuple[str, int]:
        with self._lock:
            if self._closed:
                raise RuntimeError("the ProxyRouter is closed")
            self._used = True
            proxy = self._proxies.get((host, port))
            if proxy is None:
                proxy = FaultProxy(host, port, held_signal=self.held_signal)
                proxy._set(self._toxic, self._latency, (self._dropped,))
                proxy.start()
                self._proxies[(host, port)] = proxy
            return proxy.address

    @property
    def used(self) -> bool:
        """Whether any route was asked for (the factory really routes through the proxy)."""
        return self._used

    @property
    def proxies(self) -> list[FaultProxy]:
        with self._lock:
            return list(self._proxies.values())

    @property
    def toxic(self) -> Toxic:
        return self._toxic

    @property
    def stats(self) -> ProxyStats:
        """The counters of every proxy, summed."""
        every = [dataclasses.astuple(proxy.stats) for proxy in self.proxies]
        return ProxyStats(*(sum(column) for column in zip(*every, strict=False)))

    def set(self, toxic: Toxic, *, latency: float = 0.0) -> None:
        """Switch every proxy (and the ones created later) to ``toxic``."""
        latency = _checked(toxic, latency)
        with self._lock:
            if self._closed:
                raise RuntimeError("the ProxyRouter is closed")
            self._toxic, self._latency = toxic, latency
            self._dropped = threading.Event()
            for proxy in self._proxies.values():
                proxy._set(toxic, latency, (self._dropped,))

    def reset_connections(self) -> None:
        for proxy in self.proxies:
            proxy.reset_connections()

    def wait_reply_dropped(self, timeout: float) -> bool:
        """True once any proxy dropped a reply under the toxic of the last ``set()``."""
        return self._dropped.wait(timeout)

    @property
    def held(self) -> int:
        """Request chunks waiting under HOLD, on every proxy."""
        return sum(proxy.held for proxy in self.proxies)

    def let_through(self, count: int = 1) -> None:
        """Under HOLD: let ``count`` more request chunks on, on each proxy holding one."""
        for proxy in self.proxies:
            if proxy.held:
                proxy.let_through(count)

    def wait_held(self, done: Callable[[], bool], timeout: float) -> bool:
        """Wait until a request chunk is held or ``done()``; False on timeout. Notify
        :attr:`held_signal` when ``done`` may have changed."""
        with self.held_signal:
            return self.held_signal.wait_for(lambda: done() or self._held_now(), timeout)

    def _held_now(self) -> bool:
        with self._lock:
            proxies = list(self._proxies.values())
        return any(proxy._waiting() for proxy in proxies)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            proxies, self._proxies = list(self._proxies.values()), {}
        for proxy in proxies:
            proxy.stop()

    def __enter__(self) -> ProxyRouter:
        return self
