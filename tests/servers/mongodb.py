"""MongoDB servers for tests and benches.

Order (see ``common.py``): ``LEDGER_TEST_MONGODB_URL``; a local ``mongod`` on PATH,
started as a one-node replica set on a free port in a temporary directory;
testcontainers' MongoDB (a replica set) when a Docker engine answers; otherwise
``nx-27017`` (PyPI, a MongoDB wire-protocol server over SQLite, in the dev extra)
started on a free port with its data in a temporary directory. Only servers we started
can be restarted (kill -9, then the same port and files) by the conformance suite.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from . import common
from .common import LocalProcess, binary, docker_available, free_port

# One class for every harness (tests.servers.common), named here for its callers.
ServerUnavailable = common.ServerUnavailable

ENV = "LEDGER_TEST_MONGODB_URL"
INSTALL_HINT = (
    "set LEDGER_TEST_MONGODB_URL, put mongod on PATH, run a Docker engine, or "
    "pip install nx-27017 (the dev extra has it)"
)
START_TIMEOUT = 30.0


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            pass
    except OSError:
        return False
    from pymongo import MongoClient

    client: MongoClient[dict[str, object]] = MongoClient(
        f"mongodb://127.0.0.1:{port}/?directConnection=true", serverSelectionTimeoutMS=500
    )
    try:
        client.admin.command("ping")
        return True
    except Exception:
        return False
    finally:
        client.close()


def _wait(check: Callable[[], bool], what: str, timeout: float = START_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise ServerUnavailable(f"{what} did not come up within {timeout} s")
        time.sleep(0.05)


@dataclass
class MongoServer(LocalProcess):
    """One server process we own (mongod or nx-27017): kill -9 and restart in place."""

    kind: str  # "mongod" or "nx-27017"
    port: int
    directory: str
    argv: Sequence[str]
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"mongodb://127.0.0.1:{self.port}/ledger_tests?directConnection=true"

    def start(self) -> None:
        log = open(os.path.join(self.directory, "server.log"), "ab")  # noqa: SIM115
        self.proc = subprocess.Popen(
            list(self.argv), cwd=self.directory, stdout=log, stderr=subprocess.STDOUT
        )
        log.close()
        _wait(lambda: self._alive() and _answers(self.port), f"{self.kind} on port {self.port}")

    def _alive(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise ServerUnavailable(f"{self.kind} exited with {self.proc.returncode}")
        return True


def nx_argv(port: int, directory: str) -> list[str]:
    """nx-27017 in the foreground, one SQLite file per database under ``directory``."""
    exe = shutil.which("nx-27017") or os.path.join(os.path.dirname(sys.executable), "nx-27017")
    return [
        exe,
        "--host",
        "127.0.0.1",
        "-p",
        str(port),
        "--data-dir",
        os.path.join(directory, "data"),
        "--log-file",
        os.path.join(directory, "nx.log"),
        "--pid-file",
        os.path.join(directory, "nx.pid"),
    ]


def _nx_installed() -> bool:
    try:
        import nx_27017  # noqa: F401
    except ImportError:
        return False
    return True


def _mongod_argv(exe: str, port: int, directory: str) -> list[str]:
    return [
        exe,
        "--bind_ip",
        "127.0.0.1",
        "--port",
        str(port),
        "--dbpath",
        os.path.join(directory, "db"),
        "--replSet",
        "rs0",
    ]


def _initiate(port: int, member: str | None = None) -> None:
    from pymongo import MongoClient

    client: MongoClient[dict[str, object]] = MongoClient(
        f"mongodb://127.0.0.1:{port}/?directConnection=true", serverSelectionTimeoutMS=5000
    )
    try:
        client.admin.command(
            {
                "replSetInitiate": {
                    "_id": "rs0",
                    "members": [{"_id": 0, "host": member or f"127.0.0.1:{port}"}],
                }
            }
        )

        def primary() -> bool:
            return bool(client.admin.command("hello").get("isWritablePrimary"))

        _wait(primary, "the replica set's primary")
    finally:
        client.close()


@contextmanager
def local_server(kind: str) -> Iterator[MongoServer]:
    """A server we own in a temporary directory: ``mongod`` (replica set) or nx-27017."""
    directory = tempfile.mkdtemp(prefix=f"ledger-{kind}-")
    port = free_port()
    if kind == "mongod":
        exe = binary("mongod")
        if exe is None:
            raise ServerUnavailable(INSTALL_HINT)
        os.makedirs(os.path.join(directory, "db"))
        argv = _mongod_argv(exe, port, directory)
    else:
        if not _nx_installed():
            raise ServerUnavailable(INSTALL_HINT)
        argv = nx_argv(port, directory)
    server = MongoServer(kind, port, directory, argv)
    try:
        server.start()
        if kind == "mongod":
            _initiate(port)
        yield server
    finally:
        server.stop()
        shutil.rmtree(directory, ignore_errors=True)


@dataclass(frozen=True)
class Found:
    """A server for the tests: its URL, and the server when we own it (restartable)."""

    url: str
    label: str
    server: MongoServer | None = None

    @property
    def nx(self) -> bool:
        """nx-27017 proves only with ``durability=process`` (docs/mongodb.md)."""
        return self.server is not None and self.server.kind == "nx-27017"

    @property
    def proof_options(self) -> dict[str, str]:
        return {"durability": "process"} if self.nx else {}


@contextmanager
def mongodb() -> Iterator[Found]:
    """The first MongoDB this machine offers, in the documented order."""
    env = os.environ.get(ENV)
    if env:
        yield Found(env, "LEDGER_TEST_MONGODB_URL")
        return
    if binary("mongod") is not None:
        with local_server("mongod") as server:
            yield Found(server.url, "mongod (one-node replica set)", server)
        return
    if docker_available():
        try:
            from testcontainers.mongodb import MongoDbContainer
        except ImportError as exc:
            raise ServerUnavailable(f"testcontainers[mongodb] is not installed ({exc})") from None
        with MongoDbContainer("mongo:7", command="--replSet rs0 --bind_ip_all") as container:
            host, port = container.get_container_host_ip(), int(container.get_exposed_port(27017))
            _initiate(port, "localhost:27017")
            yield Found(f"mongodb://{host}:{port}/ledger_tests?directConnection=true", "container")
        return
    with local_server("nx-27017") as server:
        yield Found(server.url, "nx-27017", server)


def nx_server() -> Iterator[MongoServer]:
    """An nx-27017 of our own, whatever else the machine has (its findings are pinned)."""
    with local_server("nx-27017") as server:
        yield server


__all__ = ["ENV", "Found", "MongoServer", "ServerUnavailable", "local_server", "mongodb"]
