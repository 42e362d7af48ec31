"""A redis-server this process owns and can restart, for C2 across a server restart.

``persistent`` writes every change to an append-only file with ``fsync`` per write, so a
restart keeps every spent id; ``volatile`` keeps nothing on disk, so a restart forgets
(the suite must fail it on C2). ``restart`` stops the server and starts it again on the
same port and directory. Use with ``--ledger-restart tests.zoo.restartable:restart``;
``forget`` makes the server forget everything (``FLUSHALL``), for the C6 forget clauses
(``--ledger-forget tests.zoo.restartable:forget``; told a namespace, it deletes that
store's keys alone). The server belongs to this process
alone, so a flush never touches another run's data.
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import tempfile
import threading
import time
from typing import Any

import redis

from ledger_conformance import LedgerContext
from tests.servers.common import binary, free_port

from .base import ZooLedger, build, flush, flush_namespace

PERSISTENT = ["--appendonly", "yes", "--appendfsync", "always", "--save", ""]
VOLATILE = ["--appendonly", "no", "--save", ""]
PORT_ENV = "LEDGER_ZOO_OWN_REDIS_PORT"  # the owning process's server, for processes it spawns


class _Server:
    def __init__(self, options: list[str]) -> None:
        found = binary("redis-server")
        if found is None:
            raise RuntimeError("redis-server is not on PATH")
        self.binary = found
        self.options = options
        self.port = free_port()
        self.workdir = tempfile.mkdtemp(prefix="zoo-restart-")
        self.proc: subprocess.Popen[bytes] | None = None
        self.start()

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [
                self.binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--dir",
                self.workdir,
                *self.options,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
        )
        client = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=1.0)
        try:
            for _ in range(200):  # bounded: 10 s for the server to listen
                try:
                    client.ping()
                    return
                except redis.ConnectionError:
                    time.sleep(0.05)
            raise RuntimeError(f"redis-server did not listen on {self.port}")
        finally:
            client.close()

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()  # SIGTERM: redis-server exits cleanly
            self.proc.wait(10)
            self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)


_lock = threading.Lock()
_server: _Server | None = None


def _ensure(options: list[str]) -> _Server:
    global _server
    with _lock:
        if _server is None:
            _server = _Server(options)
            atexit.register(_server.close)
        return _server


def _open(ctx: LedgerContext, options: list[str], cls: type[Any] = ZooLedger) -> Any:
    inherited = os.environ.get(PORT_ENV)
    if _server is None and inherited:
        return build(cls, ctx, address=("127.0.0.1", int(inherited)))
    server = _ensure(options)
    os.environ[PORT_ENV] = str(server.port)
    return build(cls, ctx, address=("127.0.0.1", server.port))


def open_own(cls: type[Any], ctx: LedgerContext) -> Any:
    """``cls`` on this process's own persistent server (a mutant that needs ``forget``)."""
    return _open(ctx, PERSISTENT, cls)


def persistent(ctx: LedgerContext) -> Any:
    return _open(ctx, PERSISTENT)


def volatile(ctx: LedgerContext) -> Any:
    return _open(ctx, VOLATILE)


def restart() -> None:
    if _server is None:
        raise RuntimeError("no server to restart: open a ledger first")
    _server.restart()


def own_address() -> tuple[str, int]:
    """This process's own server (opened by the first ledger)."""
    if _server is None:
        raise RuntimeError("no server yet: open a ledger first")
    return ("127.0.0.1", _server.port)


def forget(namespace: str | None = None) -> None:
    """FLUSHALL, or, told a store (its label), delete that store's keys alone."""
    address = own_address()
    if namespace is None:
        flush(address)
    else:
        flush_namespace(address, namespace)
