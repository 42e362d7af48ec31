"""Each toxic of the fault proxy, proven against a tiny echo server (and a real redis)."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger_conformance.faults import FaultProxy, ProxyRouter, ProxyStats, Toxic
from tests.servers.common import binary, free_port

WAIT = 5.0  # bound on anything that should happen promptly
SILENCE = 0.3  # how long a client waits to conclude that no reply is coming


class EchoServer:
    """Echoes every chunk back and remembers what it received."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.address: tuple[str, int] = self._listener.getsockname()[:2]
        self.received = bytearray()
        self.got_data = threading.Event()
        self._lock = threading.Lock()
        self._conns: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._accepter = threading.Thread(target=self._accept, daemon=True)
        self._accepter.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                self._conns.append(conn)
            thread = threading.Thread(target=self._echo, args=(conn,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _echo(self, conn: socket.socket) -> None:
        try:
            while data := conn.recv(65536):
                with self._lock:
                    self.received += data
                self.got_data.set()
                conn.sendall(data)
        except OSError:
            pass
        finally:
            with self._lock:
                self._conns.remove(conn)
            conn.close()

    def wait_idle(self) -> None:
        """Wait (bounded) until every connection has ended and been closed."""
        for thread in list(self._threads):
            thread.join(WAIT)

    def close(self) -> None:
        self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        with self._lock:
            for conn in self._conns:
                conn.close()
        self._accepter.join(WAIT)
        for thread in self._threads:
            thread.join(WAIT)


@pytest.fixture
def echo() -> Iterator[EchoServer]:
    server = EchoServer()
    yield server
    server.close()


@pytest.fixture
def proxy(echo: EchoServer) -> Iterator[FaultProxy]:
    with FaultProxy(*echo.address) as running:
        yield running


def connect(address: tuple[str, int], timeout: float = WAIT) -> socket.socket:
    return socket.create_connection(address, timeout=timeout)


def round_trip(sock: socket.socket, payload: bytes = b"ping") -> bytes:
    sock.sendall(payload)
    received = b""
    while len(received) < len(payload):
        chunk = sock.recv(65536)
        if not chunk:
            break
        received += chunk
    return received


def test_pass_forwards_both_ways_and_counts(proxy: FaultProxy, echo: EchoServer) -> None:
    with connect(proxy.address) as sock:
        assert round_trip(sock, b"hello") == b"hello"
        assert round_trip(sock, b"again") == b"again"
    assert proxy.stats == ProxyStats(accepted=1, bytes_up=10, bytes_down=10, replies_dropped=0)
    assert bytes(echo.received) == b"helloagain"


def test_refuse_resets_existing_refuses_new_and_heal_listens_on_same_port(
    proxy: FaultProxy,
) -> None:
    address = proxy.address
    with connect(address) as existing:
        assert round_trip(existing) == b"ping"
        proxy.set(Toxic.REFUSE)
        with pytest.raises(ConnectionResetError):
            existing.recv(1)
    with pytest.raises(ConnectionRefusedError):
        connect(address)
    proxy.heal()
    assert proxy.address == address
    with connect(address) as sock:
        assert round_trip(sock) == b"ping"


def test_refuse_twice_and_heal_twice(proxy: FaultProxy) -> None:
    for _ in range(2):
        proxy.set(Toxic.REFUSE)
        proxy.set(Toxic.REFUSE)
        with pytest.raises(ConnectionRefusedError):
            connect(proxy.address)
        proxy.heal()
        proxy.heal()
        with connect(proxy.address) as sock:
            assert round_trip(sock) == b"ping"


def test_reset_existing_and_new_connections(proxy: FaultProxy) -> None:
    with connect(proxy.address) as existing:
        assert round_trip(existing) == b"ping"
        proxy.set(Toxic.RESET)
        with pytest.raises(ConnectionResetError):
            existing.recv(1)
    # Accepted, then reset: the RST may even beat the end of connect().
    with pytest.raises(ConnectionResetError), connect(proxy.address) as new:
        new.recv(1)
    assert proxy.stats.accepted == 2
    proxy.heal()
    with connect(proxy.address) as sock:
        assert round_trip(sock) == b"ping"


def test_reset_connections_keeps_serving(proxy: FaultProxy) -> None:
    with connect(proxy.address) as first, connect(proxy.address) as second:
        assert round_trip(first) == b"ping"
        assert round_trip(second) == b"ping"
        proxy.reset_connections()
        for sock in (first, second):
            with pytest.raises(ConnectionResetError):
                sock.recv(1)
    with connect(proxy.address) as sock:
        assert round_trip(sock) == b"ping"


def test_latency_delays_each_way_also_on_existing_connections(proxy: FaultProxy) -> None:
    delay = 0.15
    with connect(proxy.address) as sock:
        assert round_trip(sock) == b"ping"
        proxy.set(Toxic.LATENCY, latency=delay)
        started = time.monotonic()
        assert round_trip(sock) == b"ping"
        elapsed = time.monotonic() - started
    assert elapsed >= 2 * delay  # the request and the reply were each held back
    proxy.heal()


def test_blackhole_swallows_and_never_closes(proxy: FaultProxy, echo: EchoServer) -> None:
    with connect(proxy.address) as existing:
        assert round_trip(existing) == b"ping"
        proxy.set(Toxic.BLACKHOLE)
        with connect(proxy.address, timeout=SILENCE) as new:
            for sock in (existing, new):
                sock.settimeout(SILENCE)
                sock.sendall(b"lost")
                with pytest.raises(TimeoutError):
                    sock.recv(1)
                with pytest.raises(TimeoutError):  # still open: no EOF, no reset
                    sock.recv(1)
    assert bytes(echo.received) == b"ping"


def test_trickle_sends_the_reply_a_byte_at_a_time(proxy: FaultProxy, echo: EchoServer) -> None:
    """Each recv gets one byte (the next one comes ``latency`` later), so a per-read
    timeout longer than the gap never trips while the whole reply takes longer."""
    with connect(proxy.address) as sock:
        proxy.set(Toxic.TRICKLE, latency=0.1)
        sock.sendall(b"ping")
        sizes = [len(sock.recv(65536)) for _ in range(4)]
        proxy.heal()
    assert sizes == [1, 1, 1, 1]
    assert bytes(echo.received) == b"ping"  # the request went on whole


def test_hold_stops_requests_until_let_through(proxy: FaultProxy, echo: EchoServer) -> None:
    with connect(proxy.address) as sock:
        proxy.set(Toxic.HOLD)
        sock.sendall(b"one")
        with proxy.held_signal:
            assert proxy.held_signal.wait_for(lambda: proxy.held == 1, WAIT)
        assert bytes(echo.received) == b""  # held: nothing reached the server
        proxy.let_through(1)
        assert sock.recv(3) == b"one"  # the reply passes
        sock.sendall(b"two")
        with proxy.held_signal:
            assert proxy.held_signal.wait_for(lambda: proxy.held == 1, WAIT)
        assert bytes(echo.received) == b"one"
        proxy.heal()  # a new toxic lets every held chunk go on
        assert sock.recv(3) == b"two"
    assert bytes(echo.received) == b"onetwo"


def test_drop_replies_delivers_the_request_but_not_the_reply(
    proxy: FaultProxy, echo: EchoServer
) -> None:
    with connect(proxy.address) as sock:
        assert round_trip(sock) == b"ping"
        echo.got_data.clear()
        proxy.set(Toxic.DROP_REPLIES)
        assert not proxy.wait_reply_dropped(0)
        sock.settimeout(SILENCE)
        sock.sendall(b"spend")
        assert echo.got_data.wait(WAIT)  # the request reached the server
        assert proxy.wait_reply_dropped(WAIT)
        with pytest.raises(TimeoutError):  # ... and the answer never came back
            sock.recv(1)
    assert bytes(echo.received) == b"pingspend"
    assert proxy.stats.replies_dropped >= 1
    assert proxy.stats.bytes_down == 4
    proxy.heal()
    assert not proxy.wait_reply_dropped(0)  # a fresh set() starts a fresh signal
    with connect(proxy.address) as sock:
        assert round_trip(sock) == b"ping"


def test_reset_after_request(proxy: FaultProxy, echo: EchoServer) -> None:
    proxy.set(Toxic.RESET_AFTER_REQUEST)
    with connect(proxy.address) as sock:
        sock.sendall(b"spend")
        with pytest.raises(ConnectionResetError):
            sock.recv(1)
    assert bytes(echo.received) == b"spend"
    assert proxy.wait_reply_dropped(WAIT)
    assert proxy.stats.replies_dropped == 1


def _read_until_closed(sock: socket.socket, into: bytearray) -> None:
    while chunk := sock.recv(1):
        into += chunk


def test_partial_write_delivers_half_a_request_then_resets(
    proxy: FaultProxy, echo: EchoServer
) -> None:
    proxy.set(Toxic.PARTIAL_WRITE)
    with connect(proxy.address) as sock:
        sock.sendall(b"spend-id")
        echoed = bytearray()
        with pytest.raises(ConnectionResetError):  # the echo of the half may come first
            _read_until_closed(sock, echoed)
    assert b"spen".startswith(echoed)
    assert echo.got_data.wait(WAIT)
    assert bytes(echo.received) == b"spen"
    assert proxy.stats.bytes_up == 4  # the half, and nothing after it
    proxy.heal()
    with connect(proxy.address) as sock:
        assert round_trip(sock) == b"ping"


def test_toxic_chosen_before_start(echo: EchoServer) -> None:
    proxy = FaultProxy(*echo.address)
    proxy.set(Toxic.REFUSE)
    with proxy:
        with pytest.raises(ConnectionRefusedError):
            connect(proxy.address)
        proxy.heal()
        with connect(proxy.address) as sock:
            assert round_trip(sock) == b"ping"


def test_unreachable_upstream_resets_the_client() -> None:
    with (
        FaultProxy("127.0.0.1", free_port()) as proxy,
        pytest.raises(ConnectionResetError),
        connect(proxy.address) as sock,
    ):
        sock.recv(1)


def test_bad_arguments(proxy: FaultProxy) -> None:
    with pytest.raises(ValueError):
        proxy.set(Toxic.LATENCY, latency=-1)
    with pytest.raises(ValueError):
        proxy.set(Toxic.LATENCY, latency=float("nan"))
    with pytest.raises(TypeError):
        proxy.set("reset")  # type: ignore[arg-type]
    with pytest.raises(RuntimeError):
        FaultProxy("127.0.0.1", 1).address  # noqa: B018


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc")
def test_stop_joins_the_thread_and_frees_everything(echo: EchoServer) -> None:
    before_fds = _open_fds()
    before_threads = set(threading.enumerate())
    proxy = FaultProxy(*echo.address)
    proxy.start()
    sock = connect(proxy.address)
    assert round_trip(sock) == b"ping"
    proxy.set(Toxic.BLACKHOLE)  # a connection held open by the blackhole
    host, port = proxy.address
    proxy.stop()
    proxy.stop()  # idempotent
    with pytest.raises(ConnectionResetError):
        sock.recv(1)
    sock.close()
    echo.wait_idle()
    assert set(threading.enumerate()) <= before_threads
    assert _open_fds() <= before_fds
    with socket.socket() as probe:  # the port is free again
        probe.bind((host, port))
    with pytest.raises(RuntimeError):
        proxy.start()
    with pytest.raises(RuntimeError):
        proxy.set(Toxic.PASS)


def test_controls_from_async_code(proxy: FaultProxy, echo: EchoServer) -> None:
    async def main() -> None:
        reader, writer = await asyncio.open_connection(*proxy.address)
        writer.write(b"ping")
        assert await asyncio.wait_for(reader.readexactly(4), WAIT) == b"ping"
        proxy.set(Toxic.DROP_REPLIES)
        writer.write(b"lost")
        assert await asyncio.to_thread(proxy.wait_reply_dropped, WAIT)
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(reader.readexactly(1), SILENCE)
        proxy.set(Toxic.RESET)
        with pytest.raises(ConnectionResetError):
            await asyncio.wait_for(reader.readexactly(1), WAIT)
        writer.close()

    asyncio.run(main())
    assert bytes(echo.received) == b"pinglost"


def test_router_one_proxy_per_upstream() -> None:
    first, second = EchoServer(), EchoServer()
    try:
        with ProxyRouter() as route:
            assert not route.used
            a = route(*first.address)
            assert route.used
            assert route(*first.address) == a
            b = route(*second.address)
            assert a != b
            assert len(route.proxies) == 2
            route.set(Toxic.REFUSE)
            for address in (a, b):
                with pytest.raises(ConnectionRefusedError):
                    connect(address)
            route.heal()
            for address in (a, b):
                with connect(address) as sock:
                    assert round_trip(sock) == b"ping"
            route.set(Toxic.DROP_REPLIES)
            assert not route.wait_reply_dropped(0)
            with connect(b, timeout=SILENCE) as sock:
                sock.sendall(b"x")
                assert route.wait_reply_dropped(WAIT)
            assert route.stats.accepted == 3
            assert route.stats.replies_dropped == 1
            proxies = route.proxies
        assert all(proxy._thread is not None for proxy in proxies)
        assert not any(proxy._thread.is_alive() for proxy in proxies if proxy._thread)
        with pytest.raises(RuntimeError):
            route(*first.address)
    finally:
        first.close()
        second.close()


def test_router_applies_the_current_toxic_to_new_proxies(echo: EchoServer) -> None:
    with ProxyRouter() as route:
        route.set(Toxic.RESET_AFTER_REQUEST)
        address = route(*echo.address)
        with connect(address) as sock:
            sock.sendall(b"spend")
            with pytest.raises(ConnectionResetError):
                sock.recv(1)
        assert route.wait_reply_dropped(WAIT)
        assert route.toxic is Toxic.RESET_AFTER_REQUEST


@pytest.fixture
def redis_port(tmp_path: Path) -> Iterator[int]:
    server = binary("redis-server")
    if server is None:
        pytest.skip("redis-server is not on PATH")
    port = free_port()
    args = [server, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    process = subprocess.Popen(
        [*args, "--dir", str(tmp_path)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + WAIT
        while True:  # bounded: wait until the server answers
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2) as probe:
                    probe.sendall(b"PING\r\n")
                    if probe.recv(16).startswith(b"+PONG"):
                        break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise
        yield port
    finally:
        process.terminate()
        process.wait(WAIT)


def test_redis_request_lands_but_reply_is_lost(redis_port: int) -> None:
    redis = pytest.importorskip("redis")
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    with FaultProxy("127.0.0.1", redis_port) as proxy:
        host, port = proxy.address
        no_retry = Retry(NoBackoff(), 0)  # see each fault once, as a ledger's driver would
        client = redis.Redis(host=host, port=port, socket_timeout=SILENCE, retry=no_retry)
        direct = redis.Redis(host="127.0.0.1", port=redis_port, socket_timeout=WAIT)
        try:
            assert client.ping()
            proxy.set(Toxic.DROP_REPLIES)
            with pytest.raises(redis.TimeoutError):
                client.set("spent:1", "token")
            assert proxy.wait_reply_dropped(WAIT)
            assert direct.get("spent:1") == b"token"  # it landed
            proxy.set(Toxic.REFUSE)
            with pytest.raises(redis.ConnectionError):
                client.get("spent:1")
            proxy.heal()
            assert client.get("spent:1") == b"token"
        finally:
            client.close()
            direct.close()


def test_stop_leaves_no_task_pending_on_the_closed_loop(echo: EchoServer) -> None:
    """A task that outlived the reset (3.10-3.11's ``wait_for`` can swallow the cancel
    that meets a finished connect) is ended before the loop closes: collected later, it
    would run its ``finally`` on a closed loop."""
    proxy = FaultProxy(*echo.address)
    proxy.start()
    loop = proxy._loop
    assert loop is not None
    leftover = asyncio.run_coroutine_threadsafe(asyncio.sleep(3600), loop)
    proxy.stop()
    assert leftover.cancelled()
    assert loop.is_closed()
