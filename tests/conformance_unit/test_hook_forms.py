"""The forget hook told one namespace: a shell command by its environment, a callable by
its argument; a hook that cannot be told says so before it is called."""

from __future__ import annotations

import functools

from ledger_conformance.hooks import (
    FORGET_NAMESPACE_ENV,
    ShellHook,
    forget_namespace,
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
