"""A small TCP relay on 127.0.0.1 whose links can be silenced, for timeout and C5 tests.

``silence_replies()`` keeps every current link open but drops what the server sends
on it: a statement reaches the server and commits, and its answer never arrives (the
"connection lost around COMMIT" case). ``silence_requests()`` drops what clients send
instead: the statement never arrives. Links opened afterwards relay normally, except
after ``stop_server()``, which silences the server on every link, open or new.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class Relay:
    def __init__(self, host: str, port: int) -> None:
        self._target = (host, port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.2)
        self.port: int = self._listener.getsockname()[1]
        self._links: list[
            tuple[socket.socket, socket.socket, threading.Event, threading.Event]
        ] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._mute_new = False
        self._threads: list[threading.Thread] = []
        self._spawn(self._accept)

    def _spawn(self, target: object, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)  # type: ignore[arg-type]
        thread.start()
        self._threads.append(thread)

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            server = socket.create_connection(self._target, timeout=5)
            server.settimeout(None)
            mute_up, mute_down = threading.Event(), threading.Event()
            with self._lock:
                if self._mute_new:
                    mute_down.set()
                self._links.append((client, server, mute_up, mute_down))
            self._spawn(self._pump, client, server, mute_up)
            self._spawn(self._pump, server, client, mute_down)

    def _pump(self, src: socket.socket, dst: socket.socket, mute: threading.Event) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                if not mute.is_set():
                    dst.sendall(data)
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)

    def silence_replies(self) -> None:
        """From now on, drop the server's answers on every link open at this moment."""
        with self._lock:
            for _, _, _, mute_down in self._links:
                mute_down.set()

    def stop_server(self) -> None:
        """As if the server were stopped (SIGSTOP): no answer on any link, open now or
        later; new connections are still accepted by the kernel, and hang."""
        with self._lock:
            self._mute_new = True
            for _, _, _, mute_down in self._links:
                mute_down.set()

    def silence_requests(self) -> None:
        """From now on, drop what clients send on every link open at this moment."""
        with self._lock:
            for _, _, mute_up, _ in self._links:
                mute_up.set()

    def close(self) -> None:
        self._stop.set()
        self._listener.close()
        with self._lock:
            links, self._links = self._links, []
        for client, server, _, _ in links:
            for sock in (client, server):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()
        for thread in self._threads:
            thread.join(timeout=2)


@contextmanager
def relay(host: str, port: int) -> Iterator[Relay]:
    r = Relay(host, port)
    try:
        yield r
    finally:
        r.close()


@contextmanager
def black_hole() -> Iterator[int]:
    """A port that accepts connections and never answers."""
    listener = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            accepted.append(conn)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join(timeout=2)
        listener.close()
        for conn in accepted:
            conn.close()
