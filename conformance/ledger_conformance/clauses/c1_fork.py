"""C1 after fork: a ledger opened and used in a parent, then inherited by forked children.

A ledger that keeps using inherited connections shares one among processes (replies
interleave: one id answers ``True`` twice) or hangs on a thread that does not exist in the
child. Children use only the inherited ledger and leave with ``os._exit``; only the sync
variant is forked (an event loop does not survive ``fork()``).
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import random
import select
import selectors
import signal
import time
import traceback
import warnings
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any, NoReturn

import pytest

from ledger_core.errors import LedgerError

from ..context import identity_route
from ..faults import ProxyRouter, Toxic
from ..harness import KEY_SEPARATOR, Handle, Ledgers, error_text
from ..history import History, Op
from ..profile import Profile
from .c1_once import C1
from .common import (
    assert_linearizable,
    expect_bool,
    not_exercised,
    require_routed,
    require_store_id,
)

GO = b"g"


@dataclass
class _Child:
    pid: int
    out: int  # read end of the child's result pipe
    data: bytearray = field(default_factory=bytearray)
    status: int | None = None  # os.waitpid status once reaped
    killed: bool = False


def _child_main(
    ledger: Any, label: str, ids: list[str], seed: int, ready: int, go: int, out: int
) -> NoReturn:
    """Runs in the forked child: wait for the release, spend every id, report, _exit."""
    code = 1
    try:
        gc.disable()  # no finalizer of the parent's objects may run here
        os.write(ready, b"r")
        if os.read(go, 1) != GO:  # EOF: the parent gave up before the release
            os._exit(3)
        order = list(ids)
        random.Random(seed).shuffle(order)
        process = f"fork{os.getpid()}"
        ops: list[Op] = []
        foreign: list[str] = []
        for request_id in order:
            key = f"{label}{KEY_SEPARATOR}{request_id}"
            invoke = time.monotonic_ns()
            try:
                value = ledger.spend(request_id)
            except Exception as exc:
                ops.append(
                    Op(process, "spend", key, invoke, time.monotonic_ns(), None, error_text(exc))
                )
                if not isinstance(exc, LedgerError):
                    foreign.append(error_text(exc))
                continue
            ops.append(Op(process, "spend", key, invoke, time.monotonic_ns(), value, None))
        report = {"ops": History(ops).to_json(), "foreign": foreign}
        _write_all(out, json.dumps(report).encode())
        code = 0
    except BaseException:
        with contextlib.suppress(BaseException):
            _write_all(out, json.dumps({"crash": traceback.format_exc(limit=8)}).encode())
    finally:
        os._exit(code)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _fork(target: Any, *args: Any) -> int:
    with warnings.catch_warnings():  # 3.12+: "multi-threaded, fork() may deadlock": we know
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child: whatever happens, it never returns into pytest
        try:
            target(*args)
        finally:
            os._exit(70)
    return pid


def _nothing() -> None:
    return None


def _fork_children(
    ledger: Any, label: str, ids: list[str], profile: Profile, forked: Callable[[], None] = _nothing
) -> tuple[list[_Child], list[str]]:
    """Fork the children, call ``forked()``, release them at once, collect their reports
    (bounded): the children, reaped (the hung ones killed), and the problems seen."""
    deadline = time.monotonic() + profile.fork_bound
    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()
    children: list[_Child] = []
    problems: list[str] = []
    try:
        for n in range(profile.fork_processes):
            out_r, out_w = os.pipe()

            def child(out_r: int = out_r, out_w: int = out_w, n: int = n) -> NoReturn:
                os.close(out_r)
                os.close(ready_r)
                os.close(go_w)  # so the release read sees EOF if the parent gives up
                _child_main(ledger, label, ids, n, ready_w, go_r, out_w)

            pid = _fork(child)
            os.close(out_w)
            children.append(_Child(pid, out_r))
        forked()
        os.close(ready_w)
        ready_w = -1
        waiting = len(children)
        while waiting:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([ready_r], [], [], remaining)[0]:
                break
            got = os.read(ready_r, waiting)
            if not got:
                break
            waiting -= len(got)
        if waiting:
            problems.append(f"{waiting} forked child(ren) never became ready")
        else:
            os.write(go_w, GO * len(children))  # every child is blocked on its read: go
        os.close(go_w)
        go_w = -1
        _read_reports(children, deadline)
    finally:
        for fd in (ready_r, ready_w, go_r, go_w):
            if fd >= 0:
                os.close(fd)
        for c in children:
            os.close(c.out)
        _reap(children, deadline)
    hung = [c for c in children if c.killed]
    if hung:
        problems.append(
            f"{len(hung)} forked child(ren) still running after {profile.fork_bound:g} s "
            "(killed): a call hung in a child (timeouts must hold after fork)"
        )
    return children, problems


def _read_reports(children: list[_Child], deadline: float) -> None:
    with selectors.DefaultSelector() as selector:
        for c in children:
            selector.register(c.out, selectors.EVENT_READ, c)
        while selector.get_map():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            for key, _ in selector.select(remaining):
                c = key.data
                chunk = os.read(c.out, 65536)
                if chunk:
                    c.data += chunk
                else:
                    selector.unregister(c.out)


def _reap(children: list[_Child], deadline: float) -> None:
    """Wait for every child until the deadline, then kill what is left (a hang)."""
    pending = [c for c in children if c.status is None]
    while pending and time.monotonic() < deadline:
        for c in pending:
            pid, status = os.waitpid(c.pid, os.WNOHANG)
            if pid:
                c.status = status
        pending = [c for c in pending if c.status is None]
        if pending:
            time.sleep(0.01)  # polling child exit, bounded by the deadline: not a race fix
    for c in pending:
        c.killed = True
        with contextlib.suppress(ProcessLookupError):
            os.kill(c.pid, signal.SIGKILL)
        _, c.status = os.waitpid(c.pid, 0)


def _hold_a_spend(ledgers: Ledgers, router: ProxyRouter, parent: Handle) -> Callable[[], None]:
    """Another thread of the parent inside a spend while the children fork: the proxy
    holds that spend's request; the children's traffic passes once they forked."""
    router.set(Toxic.HOLD)
    busy = ledgers.executor.submit(parent.call, "spend", ledgers.ids(1, "busy")[0])
    if not router.wait_held(busy.done, ledgers.profile.settle) or busy.done():
        pytest.fail("the parent's busy spend sent no request to hold", pytrace=False)
    return router.heal


class C1Fork:
    @C1()
    @pytest.mark.parametrize("parent_thread", ["idle", "busy"])
    @pytest.mark.parametrize("flavor", ["sync", "async"])
    def test_C1_fork_inherited_ledger(
        self, ledgers: Ledgers, flavor: str, parent_thread: str
    ) -> None:
        """Open and use a sync ledger here, fork, and spend the same ids in every child
        (``busy``: while another thread of the parent is inside a spend, its request
        held by the fault proxy: a lock it holds is held in every child)."""
        with ExitStack() as stack:
            self._fork_test(ledgers, flavor, parent_thread == "busy", stack)

    def _fork_test(self, ledgers: Ledgers, flavor: str, busy: bool, stack: ExitStack) -> None:
        if flavor == "async":
            not_exercised(
                "an event loop does not survive fork(), so an async ledger is never shared "
                "with forked children (the sync variant is forked)"
            )
        if not hasattr(os, "fork"):
            not_exercised("this platform has no os.fork")
        profile = ledgers.profile
        label = ledgers.label()
        router = stack.enter_context(ProxyRouter()) if busy else None
        parent = ledgers.open(label, "sync", route=router or identity_route)
        if router is not None:
            require_routed(router, "no parent call could be held")
        if parent.is_async:
            not_exercised(
                "the factory gave only an async ledger: an event loop does not survive "
                "fork(), so only a sync ledger is forked"
            )
        require_store_id(parent, "once")
        warm = ledgers.ids(1, "warm")[0]
        assert expect_bool(parent.spend(warm, "parent"), "spend in the parent") is True
        if parent.has_is_spent:
            assert parent.is_spent(warm, "parent") is True, "the parent's spend reads unspent"
        ids = ledgers.ids(profile.fork_ids)
        forked = _hold_a_spend(ledgers, router, parent) if router is not None else _nothing
        children, problems = _fork_children(parent.ledger, label, ids, profile, forked)

        results: dict[str, list[object]] = {request_id: [] for request_id in ids}
        raised: dict[str, int] = {request_id: 0 for request_id in ids}
        for c in children:
            if c.killed:
                continue
            report = _report(c, problems)
            if report is None:
                continue
            ops = History.from_json(report["ops"]).ops
            foreign = report.get("foreign") or []
            if foreign:
                problems.append(
                    f"child {c.pid}: {len(foreign)} spend(s) raised a non-LedgerError: {foreign[0]}"
                )
            if ops and all(op.error is not None for op in ops):
                problems.append(
                    f"child {c.pid}: every spend raised (first: {ops[0].error}): the inherited "
                    "ledger never answered in the child (it must rebuild what it inherited)"
                )
            for request_id, op in ledgers.adopt(label, ops):
                if op.error is not None:
                    raised[request_id] += 1
                else:
                    results[request_id].append(op.result)

        complete = not problems  # every child reported every call
        for request_id, answers in results.items():
            wins = sum(1 for a in answers if a is True)
            odd = [a for a in answers if not isinstance(a, bool)]
            if odd:
                problems.append(f"{request_id!r}: answered {odd[0]!r}, not a bool")
            if wins > 1:
                problems.append(f"{request_id!r}: {wins} forked children got True (one may)")
            elif wins == 0 and not raised[request_id] and complete:
                problems.append(f"{request_id!r}: no child got True and none raised")

        # The parent's own instance must still work, and see what its children spent.
        for request_id in ids:
            try:
                if parent.has_is_spent:
                    seen = parent.is_spent(request_id, "parent-after")
                else:
                    seen = parent.spend(request_id, "parent-after") is False
            except Exception as exc:
                problems.append(
                    f"the parent's instance raised after its children ran: {error_text(exc)} "
                    "(a child must not close or disturb the parent's connections)"
                )
                break
            won = any(a is True for a in results[request_id])
            if seen is not True and (won or complete):
                problems.append(f"{request_id!r}: the parent reads it unspent after the children")
        context = (
            f"{profile.fork_processes} children forked from a parent that opened and used the "
            f"ledger, {len(ids)} ids each"
        )
        assert not problems, f"{context}: " + "\n  ".join(problems[:10])
        assert_linearizable(ledgers, "C1")


def _report(child: _Child, problems: list[str]) -> dict[str, Any] | None:
    status = child.status or 0
    try:
        report: dict[str, Any] = json.loads(child.data.decode()) if child.data else {}
    except ValueError:
        report = {}
    if "crash" in report:
        problems.append(f"child {child.pid} crashed: {report['crash'].strip().splitlines()[-1]}")
        return None
    if os.WIFSIGNALED(status):
        problems.append(f"child {child.pid} died of signal {os.WTERMSIG(status)}")
        return None
    if "ops" not in report:
        code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else status
        problems.append(f"child {child.pid} exited ({code}) without a report")
        return None
    return report
