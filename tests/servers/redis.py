"""Redis servers for tests and benches: local ``redis-server`` processes on free ports.

Order (see ``common.py``): a URL from the environment (``LEDGER_TEST_REDIS_URL``,
``LEDGER_TEST_REDIS_CLUSTER_URL``), else ``redis-server`` from PATH started in a
temporary directory, else testcontainers when a Docker engine answers, else a skip
that says what to install. Configurations that need to kill or reconfigure the server
(durable, allkeys-lru) only run on a local binary.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field

from ledger_conformance.faults import FaultProxy, Toxic

from . import common
from .common import LocalProcess, binary, docker_available, free_port

# One class for every harness (tests.servers.common), named here for its callers.
ServerUnavailable = common.ServerUnavailable

PLAIN_ENV = "LEDGER_TEST_REDIS_URL"
INSTALL_HINT = "install redis-server (apt-get install -y redis-server) or set LEDGER_TEST_REDIS_URL"
START_TIMEOUT = 10.0


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the thread that started it ends (the test
    process's main thread: however it dies, SIGKILL included)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _spawn(args: Sequence[str], directory: str) -> subprocess.Popen[bytes]:
    """A server process: it dies with the main thread when that started it, even when
    the test process is killed -9 (``common`` stops the rest on SIGTERM/SIGINT and at
    exit); a restart from another thread (the torture campaign's) outlives that thread."""
    main = threading.current_thread() is threading.main_thread()
    log = open(os.path.join(directory, "redis.log"), "ab")  # noqa: SIM115
    try:
        return subprocess.Popen(
            list(args),
            cwd=directory,
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent if main else None,
        )
    finally:
        log.close()


def _ping(port: int, password: str | None = None) -> bool:
    auth = b"" if password is None else b"AUTH %s\r\n" % password.encode()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
            sock.sendall(auth + b"PING\r\n")
            expected = b"+PONG" if password is None else b"+OK\r\n+PONG"
            return _received(sock, len(expected)).startswith(expected)
    except OSError:
        return False


def _received(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(64)
        if not chunk:
            break
        data += chunk
    return data


def _wait(check: object, what: str, timeout: float = START_TIMEOUT) -> None:
    """Poll ``check()`` until true, for at most ``timeout`` seconds (bounded)."""
    assert callable(check)
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise ServerUnavailable(f"{what} did not come up within {timeout} s")
        time.sleep(0.01)


@dataclass
class RedisServer(LocalProcess):
    """One ``redis-server`` process we own: stop, kill -9 and restart on the same port."""

    port: int
    directory: str
    args: Sequence[str]
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        exe = binary("redis-server")
        if exe is None:
            raise ServerUnavailable(INSTALL_HINT)
        self.proc = _spawn([exe, "--port", str(self.port), *self.args], self.directory)
        _wait(lambda: _ping(self.port), f"redis-server on port {self.port}")

    def graceful_restart(self) -> None:
        """SIGTERM (Redis saves its snapshot and fsyncs its AOF), then start again."""
        self.stop()
        self.start()


BASE_ARGS = ("--bind", "127.0.0.1", "--protected-mode", "no", "--daemonize", "no")
# What a store_id claims (docs/contract.md "Durability"): only an append-only file
# fsynced on every write keeps an acknowledged spend through a machine crash, so the
# servers that must prove run AOF with appendfsync always.
PLAIN = ("--save", "", "--appendonly", "yes", "--appendfsync", "always")
DURABLE = PLAIN
# appendfsync no: the AOF is written before each reply and fsynced by the OS, so a spend
# survives kill -9 (the page cache keeps it), not a power loss: proves only with
# durability=process.
PAGE_CACHE = ("--save", "", "--appendonly", "yes", "--appendfsync", "no")
# appendfsync everysec: may postpone the AOF write while an fsync runs, and reply anyway:
# kill -9 can lose an acknowledged spend, so it never proves.
EVERYSEC = ("--save", "", "--appendonly", "yes", "--appendfsync", "everysec")
# The Redis default: snapshots only. kill -9 loses every spend since the last snapshot.
SNAPSHOT_ONLY = ("--save", "3600 1 300 100 60 10000", "--appendonly", "no")
ALLKEYS_LRU = (*PLAIN, "--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru")


def start_local(args: Sequence[str]) -> RedisServer:
    directory = tempfile.mkdtemp(prefix="ledger-redis-")
    server = RedisServer(free_port(), directory, (*BASE_ARGS, "--dir", directory, *args))
    try:
        server.start()
    except BaseException:
        server.stop()
        shutil.rmtree(directory, ignore_errors=True)
        raise
    return server


@contextmanager
def redis_url(
    args: Sequence[str] = PLAIN, *, env: str | None = "LEDGER_TEST_REDIS_URL"
) -> Iterator[str]:
    """A server's URL for the duration of the block (environment, local, container)."""
    if env and os.environ.get(env):
        yield os.environ[env]
        return
    if binary("redis-server") is not None:
        with local_redis(args) as server:
            yield server.url
        return
    if docker_available():  # pragma: no cover - no Docker engine on the dev machine
        from testcontainers.redis import RedisContainer

        with RedisContainer("redis:7") as container:
            host = container.get_container_host_ip()
            yield f"redis://{host}:{container.get_exposed_port(6379)}/0"
        return
    raise ServerUnavailable(INSTALL_HINT)


@contextmanager
def local_redis(args: Sequence[str] = PLAIN) -> Iterator[RedisServer]:
    """A local server we can kill and restart (needs the binary)."""
    server = start_local(args)
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(server.directory, ignore_errors=True)


# ---------------------------------------------------------------- Cluster


def _cluster_ok(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
            sock.sendall(b"CLUSTER INFO\r\n")
            data = b""
            while b"cluster_known_nodes" not in data and len(data) < 4096:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                data += chunk
            return b"cluster_state:ok" in data
    except OSError:
        return False


CLUSTER_NODE = (
    "--cluster-enabled",
    "yes",
    "--cluster-config-file",
    "nodes.conf",
    "--cluster-node-timeout",
    "2000",
    *PLAIN,
)


# A replica's first sync starts at once, not after the default 5 s diskless-sync delay.
NO_SYNC_DELAY = ("--repl-diskless-sync-delay", "0")


@contextmanager
def local_cluster(masters: int = 3, replicas: int = 0) -> Iterator[list[RedisServer]]:
    """``masters`` cluster nodes (and ``replicas`` replicas of each) on free ports, joined
    by ``redis-cli --cluster create``: the masters first, in that order."""
    cli = binary("redis-cli")
    if binary("redis-server") is None or cli is None:
        raise ServerUnavailable(INSTALL_HINT)
    servers: list[RedisServer] = []
    try:
        for _ in range(masters * (1 + replicas)):
            port = str(free_port())
            servers.append(start_local((*CLUSTER_NODE, *NO_SYNC_DELAY, "--cluster-port", port)))
        done = subprocess.run(
            [
                cli,
                "--cluster",
                "create",
                *(f"127.0.0.1:{s.port}" for s in servers),
                "--cluster-replicas",
                str(replicas),
                "--cluster-yes",
            ],
            capture_output=True,
            timeout=30,
            check=False,
        )
        if done.returncode != 0:
            raise ServerUnavailable(f"redis-cli --cluster create failed: {done.stdout[-500:]!r}")
        _wait_cluster(servers)
        if replicas:
            for server in servers:
                _wait(lambda s=server: _synced(s.port), f"cluster replica {server.port}", 20)
        yield servers
    finally:
        for server in servers:
            server.stop()
            shutil.rmtree(server.directory, ignore_errors=True)


def _info(port: int, section: str = "replication") -> dict[str, str]:
    import redis  # the harness's own client, only where it needs one

    with redis.Redis(port=port, socket_timeout=2, decode_responses=True) as client:
        return {k: str(v) for k, v in client.info(section).items()}


def _synced(port: int) -> bool:
    """A master, or a replica whose link is up (it has the master's data set)."""
    try:
        info = _info(port)
    except Exception:  # redis-py's ConnectionError is no OSError
        return False
    return info.get("role") == "master" or info.get("master_link_status") == "up"


def _wait_cluster(servers: Sequence[RedisServer]) -> None:
    for server in servers:
        _wait(lambda s=server: _cluster_ok(s.port), f"cluster node {server.port}", 20)


@dataclass
class ClusterTarget:
    """A Cluster to test: its URL, and a restart when we own the processes."""

    url: str
    servers: Sequence[RedisServer] = ()

    @property
    def restart(self) -> Callable[[], None] | None:
        if not self.servers:
            return None

        def restart() -> None:
            for server in self.servers:
                server.graceful_restart()
            _wait_cluster(self.servers)

        return restart


@contextmanager
def cluster_target() -> Iterator[ClusterTarget]:
    """``LEDGER_TEST_REDIS_CLUSTER_URL``, or a local 3-master cluster we can restart."""
    url = os.environ.get("LEDGER_TEST_REDIS_CLUSTER_URL")
    if url:
        yield ClusterTarget(url)
        return
    with local_cluster() as servers:
        yield ClusterTarget(f"redis+cluster://127.0.0.1:{servers[0].port}", servers)


@dataclass
class TLSRedis:
    server: RedisServer
    tls_port: int
    ca_file: str

    @property
    def url(self) -> str:
        return f"rediss://127.0.0.1:{self.tls_port}/0?ssl_ca_certs={self.ca_file}"


@contextmanager
def local_tls_redis() -> Iterator[TLSRedis]:
    """A local server with a TLS port and a self-signed certificate for 127.0.0.1."""
    openssl = binary("openssl")
    if openssl is None or binary("redis-server") is None:
        raise ServerUnavailable(INSTALL_HINT + " (and openssl for the TLS test)")
    certs = tempfile.mkdtemp(prefix="ledger-redis-tls-")
    cert, key = os.path.join(certs, "cert.pem"), os.path.join(certs, "key.pem")
    done = subprocess.run(
        [
            openssl,
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-keyout",
            key,
            "-out",
            cert,
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ],
        capture_output=True,
        timeout=60,
        check=False,
    )
    if done.returncode != 0:
        shutil.rmtree(certs, ignore_errors=True)
        raise ServerUnavailable(f"openssl could not make a certificate: {done.stderr[-300:]!r}")
    tls_port = free_port()
    args = (
        *PLAIN,
        "--tls-port",
        str(tls_port),
        "--tls-cert-file",
        cert,
        "--tls-key-file",
        key,
        "--tls-ca-cert-file",
        cert,
        "--tls-auth-clients",
        "no",
    )
    try:
        with local_redis(args) as server:
            yield TLSRedis(server, tls_port, cert)
    finally:
        shutil.rmtree(certs, ignore_errors=True)


# ---------------------------------------------------------------- replication


@dataclass
class Replicated:
    """A primary, a replica of it whose replication link runs through ``relay`` (a
    :class:`FaultProxy`: ``partition()`` stops it forwarding while both ends keep their
    connection, so the primary still counts a connected replica), and, when asked,
    three Sentinels watching the primary as ``MASTER_NAME``."""

    primary: RedisServer
    replica: RedisServer
    relay: FaultProxy
    sentinels: Sequence[RedisServer] = ()

    def partition(self) -> None:
        """Stop the link once the replica holds every write so far (``WAIT``): what is
        written after it (the spends) is what a failover loses, and nothing before it
        (the genesis a ledger just wrote at open) may be lost by chance."""
        acked = _command(self.primary.port, "WAIT", "1", "1500")
        if acked != 1:
            raise AssertionError(f"the replica did not acknowledge the writes so far: {acked}")
        self.relay.set(Toxic.BLACKHOLE)

    def promote(self) -> RedisServer:
        """kill -9 the primary, then make the replica a master: by Sentinel when there
        are Sentinels (it must see the primary down), else ``REPLICAOF NO ONE``."""
        self.primary.kill9()
        if not self.sentinels:
            _command(self.replica.port, "REPLICAOF", "NO", "ONE")
        _wait(lambda: _info(self.replica.port).get("role") == "master", "the promotion", 30)
        if self.sentinels:
            _wait(self._sentinels_follow, "the Sentinels' new master", 30)
        return self.replica

    def _sentinels_follow(self) -> bool:
        want = str(self.replica.port)
        for sentinel in self.sentinels:
            reply = _command(sentinel.port, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER_NAME)
            if not isinstance(reply, list | tuple) or str(reply[1]) != want:
                return False
        return True

    @property
    def sentinel_url(self) -> str:
        first, *more = (f"127.0.0.1:{s.port}" for s in self.sentinels)
        return f"redis+sentinel://{first}/{MASTER_NAME}?sentinels={','.join(more)}"


MASTER_NAME = "ledger-primary"


def _command(port: int, *words: str, password: str | None = None) -> object:
    import redis

    with redis.Redis(
        port=port, socket_timeout=2, decode_responses=True, password=password
    ) as client:
        return client.execute_command(*words)


def _sentinel_conf(directory: str, port: int, primary: int, password: str | None) -> str:
    path = os.path.join(directory, "sentinel.conf")
    # A Sentinel with requirepass: its peers use the same password (sentinel-pass).
    auth = (
        "" if password is None else f"requirepass {password}\nsentinel sentinel-pass {password}\n"
    )
    with open(path, "w") as conf:
        conf.write(
            f"port {port}\nbind 127.0.0.1\nprotected-mode no\ndir {directory}\n{auth}"
            f"sentinel monitor {MASTER_NAME} 127.0.0.1 {primary} 2\n"
            f"sentinel down-after-milliseconds {MASTER_NAME} 1000\n"
            f"sentinel failover-timeout {MASTER_NAME} 5000\n"
            f"sentinel parallel-syncs {MASTER_NAME} 1\n"
        )
    return path


def start_sentinel(primary: int, password: str | None = None) -> RedisServer:
    """A ``redis-sentinel`` watching the primary on ``primary`` (its own free port);
    ``password``: its ``requirepass``, which clients give as ``sentinel_password``."""
    exe = binary("redis-sentinel")
    if exe is None:
        raise ServerUnavailable("install redis-sentinel (apt-get install -y redis-sentinel)")
    directory = tempfile.mkdtemp(prefix="ledger-sentinel-")
    port = free_port()
    conf = _sentinel_conf(directory, port, primary, password)
    server = SentinelProcess(port, directory, (conf,), exe=exe, password=password)
    try:
        server.start()
    except BaseException:
        server.stop()
        shutil.rmtree(directory, ignore_errors=True)
        raise
    return server


@dataclass
class SentinelProcess(RedisServer):
    exe: str = ""
    password: str | None = field(default=None, repr=False)

    def start(self) -> None:
        self.proc = _spawn([self.exe, *self.args], self.directory)
        _wait(lambda: _ping(self.port, self.password), f"redis-sentinel on port {self.port}")


@contextmanager
def local_replicated(*, sentinels: int = 0) -> Iterator[Replicated]:
    """A primary and a synced replica linked through a relay (and ``sentinels``
    Sentinels that know both), all on free ports, all stopped at the end."""
    with ExitStack() as stack:
        primary = stack.enter_context(local_redis((*PLAIN, *NO_SYNC_DELAY)))
        relay = stack.enter_context(FaultProxy("127.0.0.1", primary.port))
        _, relay_port = relay.address
        replica = stack.enter_context(
            local_redis((*PLAIN, "--replicaof", "127.0.0.1", str(relay_port)))
        )
        # The primary learns the replica's own port (REPLCONF listening-port), so the
        # Sentinels reach it directly, not through the relay.
        _wait(lambda: _synced(replica.port), "the replica's first sync", 20)
        watching: list[RedisServer] = []
        for _ in range(sentinels):
            sentinel = start_sentinel(primary.port)
            stack.callback(shutil.rmtree, sentinel.directory, True)
            stack.callback(sentinel.stop)
            watching.append(sentinel)
        pair = Replicated(primary, replica, relay, watching)
        if watching:
            _wait(lambda: all(_knows_replica(s.port) for s in watching), "the Sentinels", 30)
        yield pair


@contextmanager
def local_sentinel(password: str) -> Iterator[str]:
    """A primary and one Sentinel with ``requirepass password`` watching it: yields the
    ``redis+sentinel://`` URL without the Sentinel's password (each test adds its own)."""
    with ExitStack() as stack:
        primary = stack.enter_context(local_redis())
        sentinel = start_sentinel(primary.port, password)
        stack.callback(shutil.rmtree, sentinel.directory, True)
        stack.callback(sentinel.stop)
        yield f"redis+sentinel://127.0.0.1:{sentinel.port}/{MASTER_NAME}"


def _knows_replica(port: int) -> bool:
    """This Sentinel knows the replica and the two other Sentinels."""
    try:
        master = _command(port, "SENTINEL", "MASTER", MASTER_NAME)
    except Exception:
        return False
    if isinstance(master, list):
        master = dict(zip(master[::2], master[1::2], strict=False))
    assert isinstance(master, dict)
    return str(master.get("num-slaves")) == "1" and str(master.get("num-other-sentinels")) == "2"
