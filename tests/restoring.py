"""Restores from a backup, end to end on a real store: the documented procedure (restore,
``reidentify``, then let hosts in) leaves no instance answering for the restored store
under its old ``store_id``. Each backend's tests give the restore itself (its own
backup tool's way) as a ``Restore``: ``restore(phase, namespace)`` with ``phase``
``"snapshot"`` then ``"restore"``, the conformance suite's restore hook."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import quote

import pytest

from ledger_core import LedgerError, open_async_ledger, open_ledger
from ledger_core.protocol import aclose_ledger, close_ledger, store_id_of
from ledger_core.reidentify import reidentify

Restore = Callable[[str, str], object]


class AfterRestore:
    """The after-restore step: ``reidentify`` of the namespace told (mapped by
    ``namespace_of``, as the store label is), or of every namespace when the restore
    brought back the whole store."""

    def __init__(
        self,
        url: str,
        namespace_of: Callable[[str], str] = str,
        *,
        every_namespace: bool = False,
        options: Mapping[str, Any] | None = None,
    ) -> None:
        self.url, self.namespace_of, self.every = url, namespace_of, every_namespace
        self.options = dict(options or {})

    def __call__(self, label: str) -> object:
        namespace = self.namespace_of(label)
        if self.every:  # listed through the namespace told (the URL's own option)
            url = f"{self.url}?namespace={quote(namespace, safe='')}"
            return reidentify(url, all_namespaces=True, **self.options)
        return reidentify(self.url, namespace=namespace, **self.options)


def _refuses(call: Callable[[], object], what: str) -> None:
    try:
        answer = call()
    except LedgerError:
        return
    pytest.fail(f"{what} answered {answer!r} instead of failing closed")


def restored_then_reidentified(
    url: str, namespace: str, restore: Restore | None, label: str | None = None, **options: Any
) -> None:
    """Spend, snapshot, spend more, restore (``None``: no restore, the procedure alone),
    reidentify; then a sync and an async instance opened before fail closed on a spend
    and on a read, and a new one reports another ``store_id`` (asserted)."""
    told = namespace if label is None else label  # what the hook is told
    loop = asyncio.new_event_loop()  # one loop: the async instance lives across calls
    run = loop.run_until_complete
    try:
        sync: Any = open_ledger(url, namespace=namespace, **options)
        aio: Any = run(open_async_ledger(url, namespace=namespace, **options))
        try:
            old = store_id_of(sync)
            assert old is not None
            assert store_id_of(aio) == old
            assert sync.spend("before") is True
            if restore is not None:
                restore("snapshot", told)
            assert sync.spend("after") is True
            if restore is not None:
                restore("restore", told)
            reidentify(url, namespace=namespace, **options)
            _refuses(lambda: sync.spend("fresh-sync"), "spend on the sync instance opened before")
            _refuses(lambda: sync.is_spent("after"), "is_spent on the sync instance opened before")
            _refuses(
                lambda: run(aio.spend("fresh-async")),
                "spend on the async one",
            )
            _refuses(
                lambda: run(aio.is_spent("after")),
                "is_spent on the async one",
            )
            new: Any = open_ledger(url, namespace=namespace, create=False, **options)
            try:
                assert store_id_of(new) not in (None, old)
                assert new.is_spent("before") is True
            finally:
                close_ledger(new)
        finally:
            close_ledger(sync)
            run(aclose_ledger(aio))
    finally:
        loop.close()


def restore_goes_unseen(
    url: str, namespace: str, restore: Restore, label: str | None = None, **options: Any
) -> None:
    """The hazard the procedure exists for, asserted: after the restore alone, an instance
    opened before and a new one report the old ``store_id`` and read an id spent after
    the snapshot as unspent."""
    told = namespace if label is None else label
    before: Any = open_ledger(url, namespace=namespace, **options)
    try:
        before.spend("before")
        restore("snapshot", told)
        before.spend("after")
        restore("restore", told)
        after: Any = open_ledger(url, namespace=namespace, create=False, **options)
        try:
            assert store_id_of(after) == store_id_of(before)
            assert after.is_spent("after") is False
        finally:
            close_ledger(after)
        assert before.is_spent("after") is False
    finally:
        close_ledger(before)
