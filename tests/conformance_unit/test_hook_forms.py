"""The forget hook told one namespace, the restore hook its phase and namespace: a shell
command by its environment, a callable by its arguments; a forget hook that cannot be
told says so before it is called."""

from __future__ import annotations

import functools

from ledger_conformance.hooks import (
    FORGET_NAMESPACE_ENV,
    RESTORE,
    RESTORE_NAMESPACE_ENV,
    RESTORE_PHASE_ENV,
    SNAPSHOT,
    ShellHook,
    after_restore,
    forget_namespace,
    restore_phase,
    takes_namespace,
)


def test_a_shell_hook_reads_the_namespace_from_its_environment() -> None:
    hook = ShellHook("forget", f'printf "%s" "${FORGET_NAMESPACE_ENV}"')
    assert takes_namespace(hook)
    assert forget_namespace(hook, "ns-1") == "ns-1"
    assert hook() == ""  # a whole-store forget: not set


def test_a_callable_takes_the_namespace_as_its_argument() -> None:
    seen: list[str | None] = []

    def forget(namespace: str | None = None) -> None:
        seen.append(namespace)

    def everything() -> None:
        seen.append("all")

    assert takes_namespace(forget)
    assert takes_namespace(functools.partial(lambda path, ns=None: seen.append(ns), "f.db"))
    assert not takes_namespace(everything)
    forget_namespace(forget, "ns-2")
    assert seen == ["ns-2"]


def test_the_restore_hook_is_told_the_phase_and_the_namespace() -> None:
    """A shell command by its environment, a callable by its arguments."""
    restore = ShellHook(
        "restore", f'printf "%s %s" "${RESTORE_PHASE_ENV}" "${RESTORE_NAMESPACE_ENV}"'
    )
    assert restore_phase(restore, SNAPSHOT, "ns-1") == "snapshot ns-1"
    assert restore_phase(restore, RESTORE, "ns-1") == "restore ns-1"
    step = ShellHook("after_restore", f'printf "%s" "${RESTORE_NAMESPACE_ENV}"')
    assert after_restore(step, "ns-2") == "ns-2"
    seen: list[tuple[str, ...]] = []
    restore_phase(lambda phase, namespace: seen.append((phase, namespace)), SNAPSHOT, "ns-3")
    after_restore(lambda namespace: seen.append((namespace,)), "ns-3")
    assert seen == [("snapshot", "ns-3"), ("ns-3",)]
