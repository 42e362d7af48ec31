"""The optional hooks beside the factory: restart the store's server, make the store forget
(all of it, or one namespace), fail it over to a replica, snapshot and restore it (and the
step its procedure takes after a restore).

A hook is a callable (``module:callable``, or a factory attribute) or a bounded shell
command; one that fails or hangs fails the clause that called it, with its output, so a
broken hook never reads as a ledger that passed.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import signal
import subprocess
from collections.abc import Callable, Mapping
from typing import Any

Hook = Callable[[], object]
# A forget of one namespace: a shell hook reads it here, a callable takes it as its argument.
FORGET_NAMESPACE_ENV = "LEDGER_FORGET_NAMESPACE"
# A restore hook is told the phase (snapshot, then restore) and the namespace; the
# after-restore step the namespace: a shell hook reads them here, a callable as arguments.
RESTORE_PHASE_ENV = "LEDGER_RESTORE_PHASE"
RESTORE_NAMESPACE_ENV = "LEDGER_RESTORE_NAMESPACE"
SNAPSHOT, RESTORE = "snapshot", "restore"

HOOK_BOUND = 120.0  # seconds a shell hook may run (a server restart included)
OUTPUT_TAIL = 20  # lines of a failed command's output shown in the failure


class HookFailed(RuntimeError):
    """A hook command exited non-zero or did not finish in time (its output attached)."""


class ShellHook:
    """A shell command run as a hook: ``sh -c CMD``, in its own process group, bounded.

    The command itself is never shown in messages or reprs (it may hold a password);
    failures name the hook and show the command's output.
    """

    def __init__(self, name: str, command: str, timeout: float = HOOK_BOUND) -> None:
        self.name = name
        self.command = command
        self.timeout = timeout

    def __call__(self, env: Mapping[str, str] | None = None) -> str:
        proc = subprocess.Popen(
            self.command,
            shell=True,
            env=None if env is None else {**os.environ, **env},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a timeout kills the whole group, not just the shell
        )
        try:
            output, _ = proc.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            output, _ = proc.communicate()
            raise HookFailed(
                f"the {self.name} command did not finish within {self.timeout:g} s{_tail(output)}"
            ) from None
        if proc.returncode != 0:
            raise HookFailed(
                f"the {self.name} command exited with status {proc.returncode}{_tail(output)}"
            )
        return output.decode("utf-8", "replace")

    def __repr__(self) -> str:
        return f"ShellHook({self.name!r})"


def _tail(output: bytes | None) -> str:
    text = (output or b"").decode("utf-8", "replace").rstrip()
    if not text:
        return " (no output)"
    # One line, so the report's table shows the output with the failure.
    lines = [line.strip() for line in text.splitlines()[-OUTPUT_TAIL:] if line.strip()]
    return "; output: " + " | ".join(lines)


def takes_namespace(hook: Callable[..., object]) -> bool:
    """Whether ``hook`` can be told one namespace to forget: a shell command (through
    :data:`FORGET_NAMESPACE_ENV`) or a callable that accepts one positional argument."""
    if isinstance(hook, ShellHook):
        return True
    try:
        inspect.signature(hook).bind("namespace")
    except (TypeError, ValueError):
        return False
    return True


def forget_namespace(hook: Callable[..., object], namespace: str) -> object:
    """Run the forget hook for ``namespace`` alone (see :func:`takes_namespace`)."""
    if isinstance(hook, ShellHook):
        return hook({FORGET_NAMESPACE_ENV: namespace})
    return hook(namespace)


def restore_phase(hook: Callable[..., object], phase: str, namespace: str) -> object:
    """Run the restore hook's ``phase`` (:data:`SNAPSHOT` or :data:`RESTORE`) for the
    store that holds ``namespace``."""
    if isinstance(hook, ShellHook):
        return hook({RESTORE_PHASE_ENV: phase, RESTORE_NAMESPACE_ENV: namespace})
    return hook(phase, namespace)


def after_restore(hook: Callable[..., object], namespace: str) -> object:
    """Run the step a store's procedure takes after a restore (``reidentify``)."""
    if isinstance(hook, ShellHook):
        return hook({RESTORE_NAMESPACE_ENV: namespace})
    return hook(namespace)


def factory_hook(factory: Any, name: str) -> Hook | None:
    """A hook the factory carries as an attribute (``ledger_restart``/``ledger_forget``)."""
    hook = getattr(factory, name, None)
    return hook if callable(hook) else None


__all__ = [
    "FORGET_NAMESPACE_ENV",
    "HOOK_BOUND",
    "RESTORE",
    "RESTORE_NAMESPACE_ENV",
    "RESTORE_PHASE_ENV",
    "SNAPSHOT",
    "Hook",
    "HookFailed",
    "ShellHook",
    "after_restore",
    "factory_hook",
    "forget_namespace",
    "restore_phase",
    "takes_namespace",
]
