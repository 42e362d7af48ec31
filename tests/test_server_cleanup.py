"""An interrupted test run stops every server its harness started: SIGINT (Ctrl-C) and
SIGTERM (a CI timeout, ``kill``) alike. A ``python -m pytest`` stopped by SIGTERM used to
leave its PostgreSQL server (started by ``pg_ctl``, so not even a child) and its Redis
servers running."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RUN = """
import signal
import threading
from pathlib import Path

import pytest

from tests.servers.postgres import postgres_server
from tests.servers.redis import local_redis

# Ctrl-C's own handler, even when this run was started with SIGINT ignored (a job a
# non-interactive shell put in the background inherits SIG_IGN, and Python keeps it)
signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session")
def servers():
    with local_redis() as redis:
        if not WITH_POSTGRES:
            yield (redis.port,)
            return
        with postgres_server() as pg:
            yield redis.port, pg.port


def test_waits_for_the_signal(servers):
    Path(PORTS).write_text(" ".join(map(str, servers)))
    threading.Event().wait(120)  # the signal interrupts this
"""


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


# PostgreSQL (initdb: seconds) once; SIGINT, which pytest already turned into an unwind,
# with Redis alone.
@pytest.mark.parametrize(("signum", "postgres"), [(signal.SIGTERM, True), (signal.SIGINT, False)])
def test_an_interrupted_run_stops_its_servers(tmp_path: Path, signum: int, postgres: bool) -> None:
    ports_file = tmp_path / "ports"
    script = tmp_path / "test_interrupted.py"
    script.write_text(f"PORTS = {str(ports_file)!r}\nWITH_POSTGRES = {postgres}\n{RUN}")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path])}
    env.pop("LEDGER_TEST_POSTGRES_URL", None)
    env.pop("LEDGER_TEST_REDIS_URL", None)
    run = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(script)],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not ports_file.exists() and run.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)  # waiting for the servers to start, not for a race
        assert ports_file.exists(), run.communicate(timeout=60)[0].decode()[-3000:]
        ports = [int(p) for p in ports_file.read_text().split()]
        assert all(_listening(p) for p in ports)
        run.send_signal(signum)
        output = run.communicate(timeout=120)[0].decode()
    finally:
        if run.poll() is None:
            run.kill()
            run.wait(timeout=30)
    assert run.returncode != 0, output[-3000:]
    assert [p for p in ports if _listening(p)] == [], output[-3000:]
