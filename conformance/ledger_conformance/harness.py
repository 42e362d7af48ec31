"""The machinery every clause shares: one event loop, opened ledgers, recorded operations.

Async ledgers live on the suite's own loop (a daemon thread), so threads, tasks and the
fault watchdog drive both variants the same way.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import itertools
import secrets
import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ledger_core.protocol import is_async_ledger

from .axes import run_seed
from .context import Cleanup, Factory, Flavor, LedgerContext, Route, enter_factory, identity_route
from .declare import CAPABILITY, HOOK, ROUTE, Need
from .history import History, Op, OpKind, Recording, Violation, check
from .history import error_text as error_text  # the suite imports it from here
from .profile import Profile
from .report import LedgerSummary, summarize_ledger

T = TypeVar("T")

# How long any single call may take outside of an injected fault before the suite gives up.
CALL_BOUND = 60.0
KEY_SEPARATOR = "\x1f"


class SuiteLoop:
    """An event loop on a daemon thread that async ledgers are opened on and driven by."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="ledger-suite-loop", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = CALL_BOUND) -> T:
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("SuiteLoop.run called from the loop's own thread")
        future = self.submit(coro)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError(f"a ledger call did not finish within {timeout:g} s") from None

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        if not self._thread.is_alive():
            self.loop.close()


@dataclass(frozen=True)
class Acked:
    """A spend that answered True: the id must stay spent for the rest of the run (C2)."""

    label: str
    request_id: str
    op: Op


@dataclass
class Runtime:
    """Session-wide state: the loop, the run id, the profile, acknowledged spends per suite."""

    profile: Profile
    run_id: str = field(default_factory=lambda: secrets.token_hex(4))
    loop: SuiteLoop = field(default_factory=SuiteLoop)
    acked: dict[str, list[Acked]] = field(default_factory=dict)
    forgot: bool = False  # the forget hook ran: every earlier spend may be gone
    # suite -> (label, ids, monotonic time of their spend): C2's wait runs behind the run
    waiting: dict[str, tuple[str, list[str], float]] = field(default_factory=dict)
    # suite -> (label, ids, monotonic time C2 volume ended): re-read at the run's end
    volume: dict[str, tuple[str, list[str], float]] = field(default_factory=dict)
    # suite -> (when, store_id) seen on C2 volume's store over its life (C6 compares them)
    store_ids: dict[str, list[tuple[str, object]]] = field(default_factory=dict)
    # suite -> flavor -> what the first ledger of that flavor said of itself (the report)
    summaries: dict[str, dict[str, LedgerSummary]] = field(default_factory=dict)
    probed: set[str] = field(default_factory=set)  # suites whose capabilities were probed
    labels: itertools.count[int] = field(default_factory=itertools.count)
    seed: int = field(default_factory=run_seed)  # the axes' draws (LEDGER_CONFORMANCE_SEED)
    spawned: Any = None  # callers.Spawned: the run's spawned interpreters, at first use

    def close(self) -> None:
        if self.spawned is not None:
            self.spawned.close()
        self.loop.close()


class Handle:
    """One opened ledger, callable from any thread (sync) or from the suite loop (async)."""

    def __init__(self, ledger: Any, label: str, owner: Ledgers) -> None:
        self.ledger = ledger
        self.label = label
        self.is_async = is_async_ledger(ledger)
        self._owner = owner
        self._loop = owner.runtime.loop

    @property
    def flavor(self) -> Flavor:
        return "async" if self.is_async else "sync"

    @property
    def has_is_spent(self) -> bool:
        return callable(getattr(self.ledger, "is_spent", None))

    @property
    def store_id(self) -> object:
        """The raw attribute (absent is None): C6 checks its type."""
        return getattr(self.ledger, "store_id", None)

    def key(self, request_id: str) -> str:
        return f"{self.label}{KEY_SEPARATOR}{request_id}"

    def has(self, need: Need) -> bool:
        """Whether this ledger offers the optional capability ``need`` (detected)."""
        return need.present_on(self.ledger)

    # -- unrecorded calls (invalid ids, host rules, spend_as) -------------------------
    def call(self, method: str, *args: object) -> object:
        """Call ``method`` from a sync thread, whatever the ledger's shape."""
        fn = getattr(self.ledger, method)
        if self.is_async:
            return self._loop.run(_awaited(fn, *args))
        return fn(*args)

    async def acall(self, method: str, *args: object) -> object:
        """Call ``method`` from the suite loop (a sync ledger runs on a worker thread)."""
        fn = getattr(self.ledger, method)
        if self.is_async:
            return await fn(*args)
        return await asyncio.to_thread(fn, *args)

    def reads_spent(self, request_id: str) -> bool:
        """Unrecorded: ``is_spent`` says True, or (without it) a spend is refused."""
        if self.has_is_spent:
            return self.call("is_spent", request_id) is True
        return self.call("spend", request_id) is False

    # -- recorded calls ----------------------------------------------------------------
    def spend(self, request_id: str, process: str | None = None) -> object:
        return self._record(process, "spend", request_id)

    def is_spent(self, request_id: str, process: str | None = None) -> object:
        return self._record(process, "is_spent", request_id)

    async def aspend(self, request_id: str, process: str) -> object:
        return await self._arecord(process, "spend", request_id)

    def submit(self, kind: OpKind, request_id: str, process: str) -> concurrent.futures.Future[Any]:
        """Start a recorded call without waiting for it (the fault clauses watch it)."""
        if self.is_async:
            return self._loop.submit(self._arecord(process, kind, request_id))
        return self._owner.executor.submit(self._record, process, kind, request_id)

    def _record(self, process: str | None, kind: OpKind, request_id: str) -> object:
        who = process or threading.current_thread().name
        with self._recording(who, kind, request_id) as recording:
            recording.value = self.call(kind, request_id)
        return recording.value

    async def _arecord(self, process: str, kind: OpKind, request_id: str) -> object:
        with self._recording(process, kind, request_id) as recording:
            recording.value = await self.acall(kind, request_id)
        return recording.value

    def _recording(self, process: str, kind: OpKind, request_id: str) -> Recording:
        """A raised call is recorded unless it was cancelled (a BaseException)."""
        sink = functools.partial(self._owner.add, self.label, request_id)
        key = self.key(request_id)
        return Recording(sink, process, kind, key, catch=Exception)


async def _awaited(fn: Callable[..., Any], *args: object) -> object:
    return await fn(*args)


class Ledgers:
    """Per test: opens ledgers through the factory, records their history, closes them."""

    def __init__(self, runtime: Runtime, factory: Factory, suite_key: str) -> None:
        self.runtime = runtime
        self.factory = factory
        self.profile = runtime.profile
        self.history = History()
        self.acked = runtime.acked.setdefault(suite_key, [])
        self.suite_key = suite_key
        self.referred: list[tuple[str, str]] = []  # (clause, violations) seen, not ours
        self._number = next(runtime.labels)
        self._cleanups: list[tuple[Handle, Cleanup]] = []
        self._cleanups_lock = threading.Lock()  # threads open and close handles at once
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._ids = itertools.count()

    @property
    def executor(self) -> concurrent.futures.ThreadPoolExecutor:
        if self._executor is None:
            self._executor = concurrent.futures.ThreadPoolExecutor(
                32, thread_name_prefix=f"ledger-suite-{self._number}"
            )
        return self._executor

    def label(self, name: str = "store") -> str:
        """A store label unique to this run and test (the same name gives the same label)."""
        return f"{self.runtime.run_id}-{self._number}-{name}"

    def namespace(self, label: str) -> str:
        """What a hook is told to name the store ``label``: the factory's own
        ``namespace_of(label)`` when it has one (a URL run: the real namespace), else the
        label itself (the factory maps it, as it maps ``ctx.store``)."""
        namespace_of = getattr(self.factory, "namespace_of", None)
        return str(namespace_of(label)) if callable(namespace_of) else label

    def ids(self, count: int, tag: str = "id") -> list[str]:
        """``count`` request ids never used before in this run."""
        base = f"{self.runtime.run_id}-{self._number}-{tag}"
        return [f"{base}-{next(self._ids)}" for _ in range(count)]

    def open(
        self,
        label: str,
        flavor: Flavor = "sync",
        route: Route = identity_route,
        create: bool | None = None,
    ) -> Handle:
        """A new ledger instance on the store ``label`` (``create``: LedgerContext's)."""
        ctx = LedgerContext(store=label, route=route, flavor=flavor, create=create)
        ledger, cleanup = self.runtime.loop.run(enter_factory(self.factory, ctx))
        handle = Handle(ledger, label, self)
        with self._cleanups_lock:
            self._cleanups.append((handle, cleanup))
        seen = self.runtime.summaries.setdefault(self.suite_key, {})
        if handle.flavor not in seen:
            seen[handle.flavor] = summarize_ledger(ledger, handle.flavor)
        return handle

    def capabilities(self) -> dict[str, tuple[str, ...]]:
        """flavor -> the optional capabilities its ledgers offer: detected once per suite
        on one ledger of each flavor the factory gives, never assumed."""
        seen = self.runtime.summaries.setdefault(self.suite_key, {})
        if self.suite_key not in self.runtime.probed:
            self.runtime.probed.add(self.suite_key)
            label = f"{self.runtime.run_id}-capabilities"
            flavors: tuple[Flavor, ...] = ("sync", "async")
            for flavor in flavors:
                if flavor not in seen:
                    self.close_handle(self.open(label, flavor))
        return {flavor: s.capabilities or () for flavor, s in seen.items()}

    def unmet(self, need: Need, hook: object = None) -> str | None:
        """The skip reason when ``need`` is missing (``hook``: the need's fixture value)."""
        if need.kind == HOOK:
            return need.reason() if hook is None else None
        if need.kind == ROUTE:
            return None if getattr(self.factory, "routable", True) else need.reason()
        if need.kind == CAPABILITY:
            offered = self.capabilities().values()
            return None if any(need.name in found for found in offered) else need.reason()
        return None

    def close_handle(self, handle: Handle) -> None:
        """Close one ledger now (C2 reopen); the others close at teardown."""
        with self._cleanups_lock:
            found = [n for n, (owner, _) in enumerate(self._cleanups) if owner is handle]
            if not found:
                return
            _, cleanup = self._cleanups.pop(found[0])
        self.runtime.loop.run(cleanup(), timeout=CALL_BOUND)

    def adopt(self, label: str, ops: list[Op]) -> list[tuple[str, Op]]:
        """Ops another process recorded on ``label``: into the history (a True spend is
        acknowledged, C2); each with its request id."""
        adopted = []
        for op in ops:
            request_id = op.key.split(KEY_SEPARATOR, 1)[1]
            self.add(label, request_id, op)
            adopted.append((request_id, op))
        return adopted

    def add(self, label: str, request_id: str, op: Op) -> None:
        """Into the history; a True spend is acknowledged: it must stay spent (C2)."""
        self.history.add(op)
        if op.kind == "spend" and op.result is True:
            self.acked.append(Acked(label, request_id, op))

    def refer(self, clause: str, text: str) -> None:
        """Violations of another clause seen here: reported under that clause, once."""
        self.referred.append((clause, text))

    def violations(self, ops: History | None = None) -> list[Violation]:
        return check(self.history if ops is None else ops)

    def close(self) -> None:
        errors: list[BaseException] = []
        for _, cleanup in reversed(self._cleanups):
            try:
                self.runtime.loop.run(cleanup(), timeout=CALL_BOUND)
            except Exception as exc:
                errors.append(exc)
        self._cleanups.clear()
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
        if errors:
            raise RuntimeError(f"closing a ledger failed: {error_text(errors[0])}") from errors[0]


def describe_violations(violations: list[Violation], limit: int = 8) -> str:
    """A failure message that shows what went wrong and the ops that prove it."""
    lines = [f"{len(violations)} violation(s) of the history checker (times in ms):"]
    for v in violations[:limit]:
        lines.append(f"  [{v.clause}] {v.key!r}: {v.message}")
        base = min((op.invoke_ns for op in v.ops), default=0)
        for op in v.ops[:6]:
            outcome = op.error if op.error is not None else repr(op.result)
            start, end = (op.invoke_ns - base) / 1e6, (op.complete_ns - base) / 1e6
            lines.append(f"      {op.process} {op.kind} [{start:.1f}..{end:.1f}] -> {outcome}")
    if len(violations) > limit:
        lines.append(f"  ... and {len(violations) - limit} more")
    causes = [
        VIOLATION_CAUSES[c] for c in sorted({v.clause for v in violations}) if c in VIOLATION_CAUSES
    ]
    if causes:
        lines.append("Usual causes: " + "; ".join(causes) + ".")
    return "\n".join(lines)


# What usually produces a history checker's violation of each clause, and where to look.
VIOLATION_CAUSES = {
    "C1": "C1 (two Trues, or a False no spend explains): a read then a write outside one "
    "transaction or lock, a write that succeeds over an existing record, one id under two "
    "keys, or an error turned into False; look at spend's write and its error handling",
    "C2": "C2 (a record lost): a TTL or an eviction policy on the records, a size cap, a "
    "write acknowledged before it was durable; look at the store's expiry and durability",
    "C3": "C3 (a read that disagrees): a cached or stale read (per instance or per process, "
    "a replica, a snapshot kept open), a read keyed differently from the write, or an error "
    "read as False; look at is_spent's read path",
}
