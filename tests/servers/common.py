"""What every server harness shares: free ports, the skip policy, binaries on PATH.

A backend's server is found in this order: a URL from the environment, a local binary
started on a free port in a temporary directory, testcontainers when a Docker engine
answers; otherwise the backend is skipped with the reason. Under ``CI=true`` (or
``LEDGER_STRICT=1``) any skip fails the run (see ``tests/conftest.py``).

Every server the harness starts is stopped when the run ends, however it ends: SIGTERM
(and SIGHUP) become a ``KeyboardInterrupt`` like SIGINT, so pytest unwinds and every
fixture's ``finally`` runs; what is still registered with :func:`stop_at_exit` (a server
interrupted while it started, before its fixture held it) is stopped at exit.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import socket
import subprocess
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, suppress
from typing import Any, TypeVar

T = TypeVar("T")
_stops: dict[int, Callable[[], None]] = {}
_guard = threading.Lock()
_installed: list[bool] = []


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _stop_all() -> None:
    while _stops:
        _, stop = _stops.popitem()
        with suppress(Exception):  # at exit: stop the rest whatever one of them does
            stop()


def _install() -> None:
    """Once, in the main thread of the process that starts servers."""
    with _guard:
        if _installed or threading.current_thread() is not threading.main_thread():
            return
        _installed.append(True)
        atexit.register(_stop_all)
        for name in ("SIGTERM", "SIGHUP"):
            number = getattr(signal, name, None)
            if number is not None and signal.getsignal(number) in (signal.SIG_DFL, None):
                signal.signal(number, _interrupt)


def stop_at_exit(stop: Callable[[], None]) -> Callable[[], None]:
    """Register ``stop`` (idempotent) to run at exit unless the returned ``forget`` is
    called first (the fixture stopped the server itself)."""
    _install()
    key = id(stop)
    _stops[key] = stop
    return lambda: _stops.pop(key, None) and None


class ServerUnavailable(Exception):
    """No way to get this server here; the message says what to install."""


def serve_or_skip(factory: Callable[[], AbstractContextManager[T]]) -> Iterator[T]:
    """For a fixture: ``yield from`` the server ``factory`` gives, or skip the tests with
    the reason when none can be had here (``CI=true`` turns that skip into a failure)."""
    import pytest

    try:
        manager = factory()
        value = manager.__enter__()
    except ServerUnavailable as exc:
        pytest.skip(str(exc))
    try:
        yield value
    finally:
        manager.__exit__(None, None, None)


def strict() -> bool:
    return os.environ.get("CI", "").lower() == "true" or os.environ.get("LEDGER_STRICT") == "1"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def binary(name: str) -> str | None:
    """``name`` on PATH (or in the usual Debian server directories)."""
    found = shutil.which(name)
    if found:
        return found
    for root in ("/usr/lib/postgresql",):
        if os.path.isdir(root):
            for version in sorted(os.listdir(root), reverse=True):
                candidate = os.path.join(root, version, "bin", name)
                if os.access(candidate, os.X_OK):
                    return candidate
    return None


def docker_available() -> bool:
    """Whether a Docker engine answers (the client alone is not enough)."""
    if shutil.which("docker") is None:
        return False
    try:
        done = subprocess.run(
            ["docker", "info", "--format", "{{.ServerVersion}}"],
            capture_output=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def _killer(ref: weakref.ref[LocalProcess]) -> Callable[[], None]:
    def kill() -> None:
        live = ref()
        if live is not None:
            live.kill9()

    return kill


class LocalProcess:
    """A server process the harness started itself: crash it, restart it, stop it.

    A subclass keeps the process in ``proc`` and starts it (on the same port and files
    every time) in ``start``.
    """

    proc: subprocess.Popen[bytes] | None

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        """Every instance is killed at exit if its process still runs (see above)."""
        instance = super().__new__(cls)
        stop_at_exit(_killer(weakref.ref(instance)))
        return instance

    def start(self) -> None:
        raise NotImplementedError

    def kill9(self) -> None:
        """Crash the server: no shutdown, nothing flushed beyond what it already did."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(timeout=10)
            self.proc = None

    def restart(self) -> None:
        """kill -9, then start again on the same port and files (a crash)."""
        self.kill9()
        self.start()

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
            self.proc = None
