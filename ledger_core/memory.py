"""The in-process default ledger.

"Once" holds across every agent in this process that shares it, and only there: a
restart forgets it and another process never saw it. So it has no ``store_id`` and
never proves (C6, H3).
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Iterator

from .base import AsyncReentrantLedgerBase, ReentrantLedgerBase
from .ids import DEFAULT_NAMESPACE, is_marker, ledger_key, validate_namespace
from .opening import OpenRequest
from .protocol import LedgerInfo
from .urls import LedgerURL, redact_url

_REASON = "in-process memory: forgotten on restart and invisible to other processes"


class MemoryStore:
    """A set of spent keys behind a lock; many ledgers may share one."""

    def __init__(self, name: str = "") -> None:
        self.name = name  # its ``memory://NAME``; "" for the default or a private store
        self._keys: set[bytes] = set()
        self._holders: dict[bytes, bytes] = {}  # key -> attempt digest, for spend_as (C10)
        self._lock = threading.Lock()

    def add(self, key: bytes) -> bool:
        with self._lock:
            if key in self._keys:
                return False
            self._keys.add(key)
            return True

    def add_as(self, key: bytes, digest: bytes) -> bool:
        """Record ``key`` held by ``digest``; ``True`` also when ``digest`` already holds it."""
        with self._lock:
            if key in self._keys:
                return self._holders.get(key) == digest
            self._keys.add(key)
            self._holders[key] = digest
            return True

    def __contains__(self, key: bytes) -> bool:
        with self._lock:
            return key in self._keys

    def snapshot(self) -> list[bytes]:
        with self._lock:
            return sorted(self._keys)


def namespace_of(key: bytes) -> str:
    """The namespace of a :func:`ledger_key` (its length prefix says where it ends)."""
    length, _, rest = key.partition(b":")
    return rest[: int(length)].decode("utf-8")


_named_stores: dict[str, MemoryStore] = {}
_named_lock = threading.Lock()


def named_store(name: str) -> MemoryStore:
    """The process-wide store called ``name`` (``""`` is the default ledger's)."""
    with _named_lock:
        return _named_stores.setdefault(name, MemoryStore(name))


def _info(name: str, namespace: str) -> LedgerInfo:
    return LedgerInfo(
        backend="memory",
        store_id=None,
        reason=_REASON,
        location=redact_url(f"memory://{name}"),  # a name may hold userinfo: never shown
        namespace=namespace,
    )


class MemoryLedger(ReentrantLedgerBase):
    """A thread-safe in-process ledger (``store_id = None``)."""

    def __init__(
        self, store: MemoryStore | None = None, *, namespace: str = DEFAULT_NAMESPACE
    ) -> None:
        self._store = store if store is not None else MemoryStore()
        self._namespace = validate_namespace(namespace)
        self._info = _info(self._store.name, self._namespace)

    def _spend(self, request_id: bytes) -> bool:
        return self._store.add(ledger_key(self._namespace, request_id))

    def _is_spent(self, request_id: bytes) -> bool:
        return ledger_key(self._namespace, request_id) in self._store

    def _spend_as(self, request_id: bytes, digest: bytes) -> bool:
        return self._store.add_as(ledger_key(self._namespace, request_id), digest)

    def spent_ids(self) -> Iterator[str]:
        """Every id spent in this namespace (for ``migrate``)."""
        prefix = ledger_key(self._namespace, b"")
        for key in self._store.snapshot():
            if key.startswith(prefix) and not is_marker(key[len(prefix) :]):
                yield key[len(prefix) :].decode("utf-8")

    def namespaces(self) -> Iterator[str]:
        """Every namespace with a record (id or marker) in this store, each once, this
        ledger's own included (NamespaceListing; ``migrate --all-namespaces``)."""
        yield from sorted({self._namespace, *map(namespace_of, self._store.snapshot())})


class AsyncMemoryLedger(AsyncReentrantLedgerBase):
    """The async face of :class:`MemoryLedger`; no I/O, so it never yields."""

    def __init__(
        self, store: MemoryStore | None = None, *, namespace: str = DEFAULT_NAMESPACE
    ) -> None:
        self._sync = MemoryLedger(store, namespace=namespace)
        self._info = self._sync.describe()

    async def _spend(self, request_id: bytes) -> bool:
        return self._sync._spend(request_id)

    async def _is_spent(self, request_id: bytes) -> bool:
        return self._sync._is_spent(request_id)

    async def _spend_as(self, request_id: bytes, digest: bytes) -> bool:
        return self._sync._spend_as(request_id, digest)

    async def namespaces(self) -> AsyncIterator[str]:
        """:meth:`MemoryLedger.namespaces`, as an async iterator."""
        for name in self._sync.namespaces():
            yield name


_default: MemoryLedger | None = None


def default_ledger() -> MemoryLedger:
    """The ledger every host in this process shares when it names none."""
    global _default
    with _named_lock:
        if _default is None:
            _default = MemoryLedger(MemoryStore())
        return _default


def store_for(url: LedgerURL) -> MemoryStore:
    name = url.parts.netloc + url.parts.path
    if not name:
        return default_ledger()._store
    return named_store(name)


# ``create`` is the standard option every backend takes; a memory store always exists
# (it is created on first use and never proves), so it is accepted and has no effect.
_OPTIONS = {"create"}


class _MemoryBackend:
    """``memory://`` is the default ledger's store; ``memory://NAME`` a named one."""

    testing = "ledger_core.testing:HOOKS"

    def open(self, request: OpenRequest) -> MemoryLedger:
        request.check(_OPTIONS)
        request.create()  # validated, then ignored
        return MemoryLedger(store_for(request.url), namespace=request.namespace)

    async def open_async(self, request: OpenRequest) -> AsyncMemoryLedger:
        request.check(_OPTIONS)
        request.create()
        return AsyncMemoryLedger(store_for(request.url), namespace=request.namespace)


BACKEND = _MemoryBackend()
