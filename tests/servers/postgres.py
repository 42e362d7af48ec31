"""A PostgreSQL server for tests and benches, found in the order of ``common.py``.

1. ``LEDGER_TEST_POSTGRES_URL`` (a superuser URL; restart tests then skip);
2. ``initdb``/``pg_ctl`` on a free port in a temporary directory (run as the
   ``postgres`` user when we are root, since initdb refuses root), stopped after;
3. testcontainers' ``PostgresContainer`` when a Docker engine answers;
4. otherwise skip, saying what to install.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from urllib.parse import quote

from . import common
from .common import binary, docker_available, free_port

# One class for every harness (tests.servers.common), named here for its callers.
ServerUnavailable = common.ServerUnavailable

ENV_URL = "LEDGER_TEST_POSTGRES_URL"
INSTALL_HINT = (
    "no PostgreSQL server: set LEDGER_TEST_POSTGRES_URL, or install the server binaries "
    "(apt-get install postgresql: initdb and pg_ctl), or run a Docker engine"
)
_START_TIMEOUT = 30


@dataclass
class PostgresServer:
    """A running server; ``url`` is a superuser URL on 127.0.0.1."""

    host: str
    port: int
    user: str = "postgres"
    password: str | None = None
    dbname: str = "postgres"
    datadir: str | None = None
    tls_ca: str | None = None  # the server's self-signed certificate, when it speaks TLS
    _pg_ctl: str | None = field(default=None, repr=False)
    _as_user: list[str] = field(default_factory=list, repr=False)
    _start_args: list[str] = field(default_factory=list, repr=False)

    def url_for(self, dbname: str | None = None, user: str | None = None) -> str:
        auth = quote(user or self.user)
        if self.password and user is None:
            auth += ":" + quote(self.password)
        return f"postgresql://{auth}@{self.host}:{self.port}/{dbname or self.dbname}"

    @property
    def url(self) -> str:
        return self.url_for()

    @property
    def can_restart(self) -> bool:
        return self._pg_ctl is not None

    def _ctl(self, *args: str) -> None:
        assert self._pg_ctl is not None
        assert self.datadir is not None
        subprocess.run(
            [*self._as_user, self._pg_ctl, "-D", self.datadir, *args],
            check=True,
            capture_output=True,
            timeout=_START_TIMEOUT,
        )

    def stop(self, mode: str = "fast") -> None:
        """``mode="immediate"`` is a crash: no shutdown checkpoint, WAL replay at start."""
        self._ctl("stop", "-m", mode, "-w")

    def start(self) -> None:
        self._ctl("start", "-w", "-t", str(_START_TIMEOUT), *self._start_args)

    def restart(self, mode: str = "fast") -> None:
        self.stop(mode)
        self.start()

    def kill(self) -> None:
        """``kill -9`` of the postmaster and of every process it started (a machine that
        dies): no shutdown, nothing more sent to any standby."""
        assert self.datadir is not None
        with open(os.path.join(self.datadir, "postmaster.pid")) as pidfile:
            pid = int(pidfile.readline())
        children = [p for p in _processes() if _parent(p) == pid]
        for victim in [pid, *children]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(victim, signal.SIGKILL)

    def promote(self) -> None:
        """A standby becomes the primary (a new timeline); returns once it accepts writes."""
        self._ctl("promote", "-w", "-t", str(_START_TIMEOUT))


def _tls(root: str, as_user: list[str]) -> str | None:
    """A self-signed certificate for 127.0.0.1 when openssl is here; its path (the CA)."""
    openssl = binary("openssl")
    if openssl is None:
        return None
    crt, key = os.path.join(root, "server.crt"), os.path.join(root, "server.key")
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", key, "-out", crt],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    os.chmod(key, 0o600)
    if as_user:
        shutil.chown(key, "postgres")
        shutil.chown(crt, "postgres")
    return crt


def _local(root: str, as_user: list[str]) -> Iterator[PostgresServer]:
    initdb, pg_ctl = binary("initdb"), binary("pg_ctl")
    assert initdb is not None
    assert pg_ctl is not None
    datadir = os.path.join(root, "data")
    sockets = os.path.join(root, "sock")
    os.mkdir(sockets)
    if as_user:
        shutil.chown(root, "postgres")
        shutil.chown(sockets, "postgres")
    subprocess.run(
        [
            *as_user,
            initdb,
            "-D",
            datadir,
            "-U",
            "postgres",
            "-A",
            "trust",
            "--no-sync",
            "-E",
            "UTF8",
            "--no-locale",
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    port = free_port()
    # The conformance suite's peak is 58 connections at once (C8's look-alike reads, one
    # store per family); a leak shows as "too many clients already", not as a slow run.
    settings = (
        f"-c listen_addresses=127.0.0.1 -p {port} -k {sockets} "
        "-c max_connections=100 -c shared_buffers=32MB -c log_min_messages=fatal"
    )
    ca = _tls(root, as_user)
    if ca is not None:
        settings += (
            f" -c ssl=on -c ssl_cert_file={root}/server.crt -c ssl_key_file={root}/server.key"
        )
    server = PostgresServer(
        host="127.0.0.1",
        port=port,
        datadir=datadir,
        tls_ca=ca,
        _pg_ctl=pg_ctl,
        _as_user=as_user,
        _start_args=["-o", settings, "-l", os.path.join(root, "server.log")],
    )
    forget = common.stop_at_exit(lambda: server.stop("immediate"))
    try:
        server.start()  # inside: an interrupt while it starts still stops it
        yield server
    finally:
        forget()
        # Already stopped if a test crashed it on purpose and could not restart it.
        with contextlib.suppress(subprocess.SubprocessError):
            server.stop("immediate")


@contextmanager
def postgres_server() -> Iterator[PostgresServer]:
    """A server for the whole session; raises :class:`ServerUnavailable` with a hint."""
    url = os.environ.get(ENV_URL)
    if url:
        from urllib.parse import unquote, urlsplit

        parts = urlsplit(url)
        yield PostgresServer(
            host=parts.hostname or "127.0.0.1",
            port=parts.port or 5432,
            user=unquote(parts.username or "postgres"),
            password=unquote(parts.password) if parts.password else None,
            dbname=parts.path.lstrip("/") or "postgres",
        )
        return
    if binary("initdb") and binary("pg_ctl"):
        as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        with tempfile.TemporaryDirectory(prefix="ledger-pg-") as root:
            yield from _local(root, as_user)
        return
    if docker_available():  # pragma: no cover - no Docker engine on the dev machine
        from testcontainers.postgres import PostgresContainer

        with PostgresContainer("postgres:15", driver=None) as container:
            yield PostgresServer(
                host=container.get_container_host_ip(),
                port=int(container.get_exposed_port(5432)),
                user=container.username,
                password=container.password,
                dbname=container.dbname,
            )
        return
    raise ServerUnavailable(INSTALL_HINT)


def _processes() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def _parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return int(stat.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


@contextmanager
def local_server() -> Iterator[PostgresServer]:
    """A server of its own, always started here (a test may kill it or make it a
    primary with standbys); raises :class:`ServerUnavailable` without the binaries."""
    if not (binary("initdb") and binary("pg_ctl")):
        raise ServerUnavailable(INSTALL_HINT)
    as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    with tempfile.TemporaryDirectory(prefix="ledger-pg-") as root:
        yield from _local(root, as_user)


@contextmanager
def standby_of(
    primary: PostgresServer, *, name: str = "standby", via: tuple[str, int] | None = None
) -> Iterator[PostgresServer]:
    """A hot standby streaming from ``primary`` (one this module started), stopped after.

    ``name``: its ``cluster_name``, which is the ``application_name`` the primary sees
    (what ``synchronous_standby_names`` names). ``via``: the address it streams through
    (a relay in front of the primary, to partition the link), else the primary's own.
    """
    basebackup = binary("pg_basebackup")
    if basebackup is None or primary._pg_ctl is None:
        raise ServerUnavailable("a standby needs pg_basebackup and a primary started here")
    as_user = primary._as_user
    host, upstream = via or (primary.host, primary.port)
    with tempfile.TemporaryDirectory(prefix="ledger-pg-standby-") as root:
        if as_user:
            shutil.chown(root, "postgres")
        datadir, port = os.path.join(root, "data"), free_port()
        # -R writes primary_conninfo for the address it copied from: the relay, if any.
        subprocess.run(
            [*as_user, basebackup, "-D", datadir, "-R", "-X", "stream", "-c", "fast",
             "-h", host, "-p", str(upstream), "-U", primary.user],
            check=True, capture_output=True, timeout=_START_TIMEOUT,
        )  # fmt: skip
        # A standby refuses to start with fewer connections than its primary allows.
        settings = (
            f"-c listen_addresses=127.0.0.1 -p {port} -k {root} -c max_connections=100 "
            f"-c cluster_name={name} -c log_min_messages=fatal"
        )
        standby = PostgresServer(
            host="127.0.0.1",
            port=port,
            datadir=datadir,
            _pg_ctl=primary._pg_ctl,
            _as_user=as_user,
            _start_args=["-o", settings, "-l", os.path.join(root, "server.log")],
        )
        forget = common.stop_at_exit(lambda: standby.stop("immediate"))
        try:
            standby.start()
            yield standby
        finally:
            forget()
            with contextlib.suppress(subprocess.SubprocessError):
                standby.stop("immediate")
