"""Give a store a new identity after a restore it cannot detect (C6).

A store restored from a backup holds the genesis it had when the backup was taken, so
it would report its old ``store_id`` while every id spent after the backup reads unspent.
:func:`reidentify` writes a fresh genesis in place of the one there now, through the
backend's own identity machinery: every instance opened before fails closed on its next
operation (its proof names the old genesis), new instances report another ``store_id``,
and hosts ask every pending request again (H5). No lineage is recorded: a restored store
does not hold every id its old identity answered for.

A ledger offers it as ``reidentify()`` on its sync form (:class:`Reidentifiable`): a
compare-and-set from the genesis that instance opened to a new random one.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol, cast, runtime_checkable

from .errors import LedgerError
from .migrate import MigrationError, migration_state
from .protocol import DecisionLedger, close_ledger, describe
from .registry import open_ledger


@runtime_checkable
class Reidentifiable(Protocol):
    """A ledger whose namespace can take a fresh genesis (``decision-ledger reidentify``).

    ``reidentify()`` replaces the genesis this instance opened with a new random one in
    one write that fails (a ``LedgerError``) if the genesis there is another; afterwards
    every instance opened before, this one included, fails closed."""

    def reidentify(self) -> None: ...


class CannotReidentify(LedgerError):
    """The ledger offers no ``reidentify()``, or its store is mid-migration: nothing was
    changed."""


@dataclass(frozen=True)
class Reidentified:
    """One namespace's identity before and after (``None``: that side never proves)."""

    namespace: str | None  # as the ledger describes it (None: it names none)
    old_store_id: str | None
    new_store_id: str | None


@contextlib.contextmanager
def _opened(url: str, namespace: str | None, **options: Any) -> Iterator[DecisionLedger]:
    """Never creates (a mistyped namespace is missing, not a new store to reidentify);
    opened while a migration is unfinished, to refuse it by name."""
    named = {"namespace": namespace} if namespace else {}
    ledger = open_ledger(url, **named, **options, create=False, allow_incomplete=True)
    try:
        yield ledger
    finally:
        close_ledger(ledger)


def namespaces_of(url: str, namespace: str | None = None, **options: Any) -> list[str]:
    """Every namespace of the store at ``url`` (NamespaceListing), or a clear refusal."""
    with _opened(url, namespace, **options) as ledger:
        lister = getattr(ledger, "namespaces", None)
        if not callable(lister):
            raise MigrationError(
                f"{type(ledger).__name__} cannot list its store's namespaces (it has no "
                "namespaces(), the NamespaceListing capability); name each one with --namespace"
            )
        return sorted(lister())


def refusal(ledger: object) -> CannotReidentify | None:
    """Why ``ledger``'s namespace cannot be reidentified now, or ``None``."""
    if not callable(getattr(ledger, "reidentify", None)):
        return CannotReidentify(
            f"{type(ledger).__name__} has no reidentify(): its backend cannot give a store a "
            "new identity; after a restore, migrate it into a new store instead "
            "(decision-ledger migrate), which gets one"
        )
    unfinished = migration_state(ledger)
    if unfinished is not None:
        return CannotReidentify(
            f"{unfinished}: finish the migration first (run the same decision-ledger migrate "
            "command again), then reidentify"
        )
    return None


def reidentify_one(ledger: object) -> None:
    """Reidentify an opened sync ledger's namespace: refused (nothing changed) when it
    has no ``reidentify()`` or a migration into it is unfinished."""
    refused = refusal(ledger)
    if refused is not None:
        raise refused
    cast(Reidentifiable, ledger).reidentify()


def reidentify(
    url: str, *, namespace: str | None = None, all_namespaces: bool = False, **options: Any
) -> list[Reidentified]:
    """Give one namespace (the URL's, or ``namespace``) or every namespace of the store
    a fresh genesis, e.g. after restoring it from a backup; return each one's old and
    new ``store_id``. Nothing is created; a namespace that does not exist is
    ``LedgerUnavailable``. Hosts must be kept away until it returns."""
    if all_namespaces and namespace:
        raise CannotReidentify("give a namespace or all_namespaces, not both")
    names: list[str | None] = [namespace]
    if all_namespaces:
        names = list(namespaces_of(url, **options))
        for name in names:  # every namespace first: a refusal leaves all of them as they were
            with _opened(url, name, **options) as ledger:
                refused = refusal(ledger)
            if refused is not None:
                raise CannotReidentify(f"namespace {name!r}: {refused}; nothing was changed")
    done = []
    for name in names:
        with _opened(url, name, **options) as ledger:
            before = describe(ledger)
            reidentify_one(ledger)
        with _opened(url, name, **options) as ledger:
            new = describe(ledger).store_id
        old, shown = before.store_id, before.namespace or name
        if old is not None and new == old:  # a backend's bug: never report it as done
            raise CannotReidentify(f"namespace {shown!r} still reports store_id {old!r}")
        done.append(Reidentified(shown, old, new))
    return done


__all__ = ["CannotReidentify", "Reidentifiable", "Reidentified", "reidentify", "reidentify_one"]
