"""A tiny TCP proxy that can lose replies: the C5 faults, without the suite's proxy.

``drop_replies = n`` swallows the next ``n`` server replies, each time cutting the
connection (the command reached the server, its answer never reaches the client).
``blackhole = True`` forwards nothing at all in either direction (a silent network).
"""

from __future__ import annotations

import contextlib
import socket
import threading


class LossyProxy:
    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.drop_replies = 0
        self.blackhole = False
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _take_drop(self) -> bool:
        with self._lock:
            if self.drop_replies > 0:
                self.drop_replies -= 1
                return True
            return False

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.upstream_port), timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._sockets += [client, upstream]
            threading.Thread(target=self._pump, args=(client, upstream, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, True), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, replies: bool) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if self.blackhole:
                    continue
                if replies and self._take_drop():
                    break  # the server answered; the client never hears it
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
