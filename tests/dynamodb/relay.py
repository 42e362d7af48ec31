"""A loopback TCP relay for the DynamoDB tests: it holds requests until released (a
network that delays a request), or sends replies one byte at a time (a trickle that no
per-read timeout notices). Threads, bounded: every socket closes when it stops."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from tests.servers.common import free_port


class Relay:
    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.port = free_port()
        self.holding = threading.Event()  # set once a request chunk is held back
        self._released = threading.Event()
        self._released.set()
        self.trickle = 0.0  # seconds between reply bytes (0: whole chunks)
        self._stop = threading.Event()
        self._sockets: list[socket.socket] = []
        self._listener = socket.create_server(("127.0.0.1", self.port))
        self._listener.settimeout(0.1)
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def hold(self) -> None:
        """Hold back every request chunk from now on, until :meth:`release`."""
        self.holding.clear()
        self._released.clear()

    def release(self) -> None:
        self._released.set()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                continue
            server = socket.create_connection(self.upstream, timeout=5)
            self._sockets += [client, server]
            for src, dst, up in ((client, server, True), (server, client, False)):
                threading.Thread(target=self._pump, args=(src, dst, up), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, up: bool) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                if up and not self._released.is_set():
                    self.holding.set()
                    self._released.wait(30)
                if not up and self.trickle:
                    for byte in data:
                        if self._stop.wait(self.trickle):
                            return
                        dst.sendall(bytes([byte]))
                else:
                    dst.sendall(data)
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)

    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        self._stop.set()
        self._released.set()
        self._listener.close()
        for sock in self._sockets:
            with contextlib.suppress(OSError):
                sock.close()
        self._thread.join(5)


@contextmanager
def relay_for(endpoint_url: str) -> Iterator[Relay]:
    host, _, port = endpoint_url.removeprefix("http://").partition(":")
    relay = Relay((host, int(port.rstrip("/"))))
    try:
        yield relay
    finally:
        relay.close()


def elapsed(start: float) -> float:
    return time.monotonic() - start
