"""A ledger over two stores, so a fleet moves from an old store to a new one host by host.

A spend asks the **new** store first, then the **old** one, and answers ``True`` only
when both did (the old store is not asked once the new one said ``False``); ``is_spent``
is ``True`` when either store holds the id. So every ``True`` of a bridge is a ``True``
of both stores: hosts on the old store, on a bridge, and on the new store never both win
an id, as long as old-only and new-only hosts never run side by side (the phases of
``docs/migration.md``); and ``migrate`` never takes a decision from a bridge, since a
bridge writes the old store only after it won the new one.

A bridge answers under ONE ``store_id`` (``answer_as``): the old store's in phase 1, the
new store's in phase 2 (requests minted under the other one are asked again, H5). Phase 1
marks the new store as the target of a migration run from the old one (unless a copy
already finished), so no new-only host opens it before ``migrate`` verifies the copy;
phase 2 opens only once that copy finished.
"""

from __future__ import annotations

import contextlib
import inspect
import time
from collections.abc import Callable
from typing import Any, Literal

from .base import AsyncLedgerBase, LedgerBase
from .errors import AmbiguousSpend, LedgerError, LedgerUnavailable
from .ids import is_marker
from .migrate import Note, begin_run_steps, lineage_marker
from .protocol import (
    Durability,
    LedgerInfo,
    aclose_ledger,
    close_ledger,
    describe,
    is_async_ledger,
    store_id_of,
)
from .registry import open_async_ledger, open_ledger
from .runs import (
    READ,
    IncompleteMigration,
    MarkerStep,
    MigrationError,
    allow_incomplete,
    async_marker_performer,
    has_markers,
    marker_performer,
    run_state_steps,
)
from .steps import Steps, run_steps, run_steps_async

AnswerAs = Literal["old", "new"]
Side = Literal["old", "new"]
# (which store, "spend" or "read", id or marker bytes): what a bridge asks of one store.
Call = tuple[Side, str, bytes]


def spend_steps(raw: bytes) -> Steps[Call, bool]:
    """New store first, then old; ``True`` only from both. A failure after the new store
    recorded the id is ambiguous: the id is spent there, so it counts as spent (H2)."""
    won_new = _answer((yield ("new", "spend", raw)), "the new store's spend")
    if not won_new:
        return False
    try:
        won_old = yield ("old", "spend", raw)
    except Exception as exc:
        raise AmbiguousSpend(
            f"the new store recorded the id, then the old store's spend failed "
            f"({type(exc).__name__}): treat it as spent"
        ) from exc
    return _answer(won_old, "the old store's spend")


def read_steps(raw: bytes) -> Steps[Call, bool]:
    """Spent in either store is spent: a bridge's spend of it would answer ``False``."""
    if _answer((yield ("new", "read", raw)), "the new store's is_spent"):
        return True
    return _answer((yield ("old", "read", raw)), "the old store's is_spent")


def _answer(value: object, what: str) -> bool:
    if type(value) is not bool:
        raise AmbiguousSpend(f"{what} answered {value!r}, not a bool: the outcome is unknown")
    return value


def open_steps(
    old_id: str, answer_as: AnswerAs, note: Note | None = None
) -> Steps[MarkerStep, None]:
    """The new store's markers. Phase 1: make it the target of a run from the old one
    (or join the run a bridge or ``migrate`` started), unless a copy from it already
    finished. Phase 2: refuse unless that copy finished."""
    copied = yield (READ, lineage_marker(old_id))
    state = yield from run_state_steps()
    if answer_as == "new":
        if not copied or state.blocks_opening:
            raise IncompleteMigration(
                "phase 2 bridge: the copy from the old store into the new one has not "
                "finished; run `decision-ledger migrate OLD NEW` (while every host is on a "
                "phase 1 bridge) and let it finish first"
            )
        return
    if not copied:
        yield from begin_run_steps(old_id, merge=False, note=note)


def _info(old: object, new: object, answer_as: AnswerAs) -> LedgerInfo:
    old_info, new_info = describe(old), describe(new)
    named = old_info if answer_as == "old" else new_info
    reasons = [
        f"the {side} store never proves: {info.reason}"
        for side, info in (("old", old_info), ("new", new_info))
        if info.store_id is None
    ]
    stated = {old_info.durability, new_info.durability}
    weakest = (d for d in (Durability.NONE, Durability.PROCESS) if d in stated)
    return LedgerInfo(
        backend="bridge",
        store_id=None if reasons else named.store_id,
        reason="; ".join(reasons) or None,
        location=f"bridge {old_info.location or old_info.backend} -> "
        f"{new_info.location or new_info.backend}",
        namespace=named.namespace,
        identity=f"answers as the {answer_as} store; every spend needs True from both",
        durability=next(weakest, Durability.MACHINE),
    )


def _check_pair(old: object, new: object) -> str:
    old_id, new_id = store_id_of(old), store_id_of(new)
    if old_id is None or new_id is None:
        raise MigrationError(
            "a bridge joins two stores that prove (both have a store_id): "
            f"old {old_id!r}, new {new_id!r}"
        )
    if old_id == new_id:
        raise MigrationError("the old and new store are the same store (equal store_id)")
    if not has_markers(new):
        raise MigrationError(
            f"the new store ({type(new).__name__}) has no marker space: a bridge records the "
            "migration there (spend_marker, is_marker_spent)"
        )
    return old_id


def _method(old: object, new: object, call: Call) -> tuple[Callable[..., Any], object]:
    side, op, raw = call
    side_ledger = old if side == "old" else new
    marker = is_marker(raw)
    name = {"spend": "spend", "read": "is_spent"}[op]
    name = {"spend": "spend_marker", "is_spent": "is_marker_spent"}[name] if marker else name
    method = getattr(side_ledger, name, None)
    if not callable(method):
        raise LedgerUnavailable(f"{type(side_ledger).__name__} has no {name}: the bridge needs it")
    return method, raw if marker else raw.decode("utf-8")


def _note(old: object) -> Note:
    info = describe(old)
    return Note(info.location or info.backend, "", int(time.time()))


def _waive(new: object, answer_as: AnswerAs) -> None:
    """A phase-1 bridge writes into the new store while the copy is unfinished: it is
    part of that migration (its opening steps checked the rest)."""
    if answer_as == "old":
        allow_incomplete(new)


class Bridge(LedgerBase):
    """A sync ledger over ``old`` and ``new`` (see the module). ``answer_as`` names the
    ``store_id`` it reports: ``"old"`` in phase 1, ``"new"`` in phase 2. Opening does
    marker I/O in the new store. ``close()`` closes the two ledgers only when
    ``owns=True`` (:func:`open_bridge`)."""

    def __init__(
        self, old: object, new: object, *, answer_as: AnswerAs, owns: bool = False
    ) -> None:
        if answer_as not in ("old", "new"):
            raise ValueError(f"answer_as must be 'old' or 'new', not {answer_as!r}")
        if is_async_ledger(old) or is_async_ledger(new):
            raise TypeError("an async ledger needs the async bridge: await AsyncBridge.open(...)")
        self._old, self._new, self._owns = old, new, owns
        self._cleared = True  # its opening steps are its migration check
        run_steps(open_steps(_check_pair(old, new), answer_as, _note(old)), marker_performer(new))
        _waive(new, answer_as)
        self._info = _info(old, new, answer_as)

    def _perform(self, call: Call) -> object:
        method, arg = _method(self._old, self._new, call)
        return method(arg)

    def _spend(self, request_id: bytes) -> bool:
        return run_steps(spend_steps(request_id), self._perform)

    def _is_spent(self, request_id: bytes) -> bool:
        return run_steps(read_steps(request_id), self._perform)

    def close(self) -> None:
        if self._owns:
            for ledger in (self._new, self._old):
                close_ledger(ledger)


class AsyncBridge(AsyncLedgerBase):
    """The async bridge: the same steps, awaited. Build it with :meth:`open`."""

    def __init__(self, old: object, new: object, info: LedgerInfo, owns: bool) -> None:
        self._old, self._new, self._owns, self._info = old, new, owns, info
        self._cleared = True  # its opening steps (open) are its migration check

    @classmethod
    async def open(
        cls, old: object, new: object, *, answer_as: AnswerAs, owns: bool = False
    ) -> AsyncBridge:
        if answer_as not in ("old", "new"):
            raise ValueError(f"answer_as must be 'old' or 'new', not {answer_as!r}")
        steps = open_steps(_check_pair(old, new), answer_as, _note(old))
        await run_steps_async(steps, async_marker_performer(new))
        _waive(new, answer_as)
        return cls(old, new, _info(old, new, answer_as), owns)

    async def _perform(self, call: Call) -> object:
        method, arg = _method(self._old, self._new, call)
        answer = method(arg)
        return await answer if inspect.isawaitable(answer) else answer

    async def _spend(self, request_id: bytes) -> bool:
        return await run_steps_async(spend_steps(request_id), self._perform)

    async def _is_spent(self, request_id: bytes) -> bool:
        return await run_steps_async(read_steps(request_id), self._perform)

    async def aclose(self) -> None:
        if self._owns:
            for ledger in (self._new, self._old):
                await aclose_ledger(ledger)


def _options(answer_as: AnswerAs) -> tuple[dict[str, Any], dict[str, Any]]:
    # The old store must exist (create=False). Phase 1 may create the new store and opens
    # it while its migration is incomplete (the bridge is part of that migration); phase 2
    # needs the finished copy, so it neither creates the store nor opens an incomplete one.
    new = {"allow_incomplete": True} if answer_as == "old" else {"create": False}
    return {"create": False}, new


def open_bridge(old_url: str, new_url: str, *, answer_as: AnswerAs) -> Bridge:
    """Open both stores by URL (options in each URL's query) and bridge them; the
    bridge closes them."""
    old_kw, new_kw = _options(answer_as)
    with contextlib.ExitStack() as on_failure:  # closes what opened if a later step fails
        old = open_ledger(old_url, **old_kw)
        on_failure.callback(_close, old)
        new = open_ledger(new_url, **new_kw)
        on_failure.callback(_close, new)
        bridge = Bridge(old, new, answer_as=answer_as, owns=True)
        on_failure.pop_all()
    return bridge


async def open_async_bridge(old_url: str, new_url: str, *, answer_as: AnswerAs) -> AsyncBridge:
    """:func:`open_bridge` for asyncio."""
    old_kw, new_kw = _options(answer_as)
    async with contextlib.AsyncExitStack() as on_failure:
        ledgers = []
        for url, kw in ((old_url, old_kw), (new_url, new_kw)):
            ledgers.append(await open_async_ledger(url, **kw))
            on_failure.push_async_callback(_aclose, ledgers[-1])
        bridge = await AsyncBridge.open(*ledgers, answer_as=answer_as, owns=True)
        on_failure.pop_all()
    return bridge


def _close(ledger: object) -> None:
    with contextlib.suppress(LedgerError):  # the failure to open is what matters
        close_ledger(ledger)


async def _aclose(ledger: object) -> None:
    with contextlib.suppress(LedgerError):
        await aclose_ledger(ledger)


__all__ = ["AsyncBridge", "Bridge", "open_async_bridge", "open_bridge"]
