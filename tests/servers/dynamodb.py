"""DynamoDB servers for tests and benches: a local ``dynalite`` on a free port.

Order (see ``common.py``): ``LEDGER_TEST_DYNAMODB_URL`` (a ``dynamodb://TABLE?...`` URL
with its ``endpoint_url``/``region``; real AWS works too), else ``dynalite`` (npm; on PATH
or in ``.ci/node/bin``) started with ``--path`` in a temporary directory, so a kill -9
and restart keeps its LevelDB store, else DynamoDB Local through testcontainers when a
Docker engine answers, else a skip that says what to install. ``moto_server`` is started
only on request (it is not atomic under contention: never a proof, see docs/dynamodb.md).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from . import common
from .common import LocalProcess, binary, docker_available, free_port

# One class for every harness (tests.servers.common), named here for its callers.
ServerUnavailable = common.ServerUnavailable

URL_ENV = "LEDGER_TEST_DYNAMODB_URL"
INSTALL_HINT = (
    "install dynalite (npm install -g dynalite, or .ci/run), or set LEDGER_TEST_DYNAMODB_URL "
    "to a dynamodb://TABLE?endpoint_url=...&region=... URL"
)
START_TIMEOUT = 20.0
REGION = "us-east-1"
LOCAL_NODE_BIN = Path(__file__).resolve().parents[2] / ".ci" / "node" / "bin"


def local_credentials() -> None:
    """Dummy credentials for an emulator, and no instance-metadata lookups (slow)."""
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "ledger-test")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "ledger-test")
    os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def _wait(port: int, what: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while not _listening(port):
        if time.monotonic() > deadline:
            raise ServerUnavailable(f"{what} did not come up within {START_TIMEOUT} s")
        time.sleep(0.02)


def dynalite_binary() -> str | None:
    found = binary("dynalite")
    if found:
        return found
    local = LOCAL_NODE_BIN / "dynalite"
    return str(local) if os.access(local, os.X_OK) else None


@dataclass
class LocalServer(LocalProcess):
    """One emulator process we own: kill -9 and restart on the same port and files."""

    port: int
    directory: str
    argv: Sequence[str]
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, table: str) -> str:
        return f"dynamodb://{table}?region={REGION}&endpoint_url={self.endpoint}"

    def start(self) -> None:
        log = open(os.path.join(self.directory, "server.log"), "ab")  # noqa: SIM115
        self.proc = subprocess.Popen(
            list(self.argv), cwd=self.directory, stdout=log, stderr=subprocess.STDOUT
        )
        log.close()
        _wait(self.port, f"{self.argv[0]} on port {self.port}")


@contextmanager
def _owned(argv_for: object, prefix: str) -> Iterator[LocalServer]:
    assert callable(argv_for)
    directory = tempfile.mkdtemp(prefix=prefix)
    port = free_port()
    server = LocalServer(port, directory, argv_for(port, directory))
    local_credentials()
    try:
        server.start()
        yield server
    finally:
        server.stop()
        shutil.rmtree(directory, ignore_errors=True)


@contextmanager
def local_dynalite() -> Iterator[LocalServer]:
    """dynalite on a free port with an on-disk LevelDB store (``--path``)."""
    exe = dynalite_binary()
    if exe is None:
        raise ServerUnavailable(INSTALL_HINT)

    def argv(port: int, directory: str) -> list[str]:
        store = os.path.join(directory, "db")
        return [exe, "--host", "127.0.0.1", "--port", str(port), "--path", store]

    with _owned(argv, "ledger-dynalite-") as server:
        yield server


@contextmanager
def local_moto() -> Iterator[LocalServer]:
    """moto's server mode (in-memory): for the recorded comparison, never a CI gate."""
    exe = shutil.which("moto_server") or os.path.join(
        os.path.dirname(sys.executable), "moto_server"
    )
    if not os.access(exe, os.X_OK):
        raise ServerUnavailable("moto_server not installed (pip install 'moto[server]')")

    def argv(port: int, directory: str) -> list[str]:
        return [exe, "-H", "127.0.0.1", "-p", str(port)]

    with _owned(argv, "ledger-moto-") as server:
        yield server


@dataclass(frozen=True)
class Target:
    """Where the tests point: a base URL (``dynamodb://TABLE?...``) and, when local, the
    server we own (so its restart hook exists)."""

    url: str
    server: LocalServer | None = None


@contextmanager
def dynamodb_target(table: str) -> Iterator[Target]:
    """The environment's URL, else local dynalite, else DynamoDB Local in a container."""
    url = os.environ.get(URL_ENV)
    if url:
        yield Target(url)
        return
    if dynalite_binary() is not None:
        with local_dynalite() as server:
            yield Target(server.url(table), server)
        return
    if docker_available():
        from testcontainers.core.container import DockerContainer

        local_credentials()
        with DockerContainer("amazon/dynamodb-local").with_exposed_ports(8000) as container:
            port = int(container.get_exposed_port(8000))
            _wait(port, "DynamoDB Local")
            endpoint = f"http://{container.get_container_host_ip()}:{port}"
            yield Target(f"dynamodb://{table}?region={REGION}&endpoint_url={endpoint}")
        return
    raise ServerUnavailable(INSTALL_HINT)
