"""The conductor: proxies, worker processes, the fault schedule, hooks, the verdict.

It never spends itself. After a failover the final read is judged only when the store
still reports its first ``store_id``: another one makes it a new store (hosts ask again).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import math
import multiprocessing
import queue as queues
import secrets
import shutil
import signal
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from ledger_core.errors import LedgerError
from ledger_core.urls import scrub, secret_fragments

from ..context import LedgerContext, enter_factory, identity_route
from ..faults import ProxyRouter, Toxic
from ..history import FINAL, Op
from ..hooks import Hook, HookFailed, factory_hook
from ..loading import load_factory
from . import schedule
from .checker import Verdict, judge
from .recorder import error_line, load
from .report import Progress, Totals, Window, summary, write_violations
from .workers import READY_BOUND, ChildSpec, Source, Workload, child_main

OK, VIOLATION, USAGE, UNAVAILABLE, INTERRUPTED = 0, 1, 2, 3, 130
STORE = "store"  # the one store label: every worker's ledger is on the same store
GRACE = 60.0  # seconds after the deadline before workers still in a call are killed
FINAL_ROUNDS = 3  # final-read passes over the ids whose read raised
FINAL_PAUSE = 1.0  # seconds between those passes
FINAL_CONCURRENCY = 16
FORGET_SAMPLE = 20  # acknowledged ids the forget check asks the old and new ledger about
TICK = 0.1  # seconds the conductor waits for a worker's message between schedule checks


class CampaignError(Exception):
    """The campaign could not run (a worker could not open the ledger, a hook failed)."""


@dataclass(frozen=True)
class Campaign:
    """One torture run; the defaults suit a 2-core machine."""

    url: str | None = None
    factory: str | None = None
    duration: float = 30.0
    processes: int = 2
    threads: int = 4
    tasks: int = 8
    max_ops: int = 2_000_000
    seed: int | None = None
    faults: bool = True
    restart: Hook | None = None
    restarts: int = 2
    forget: Hook | None = None
    failover: Hook | None = None
    failovers: int = 2
    hot: int = 4  # ids every worker contends for, per generation
    cold: int = 32  # ids per small group of workers, per generation
    generation: float = 1.0  # seconds before a fresh set of ids
    report: Path | None = None  # the violation file (default: ./torture-<run>.txt)
    progress_every: float = 5.0
    grace: float = GRACE

    def check(self) -> None:
        if (self.url is None) == (self.factory is None):
            raise ValueError("give one ledger: a URL or --factory module:callable")
        if not (math.isfinite(self.duration) and 0 < self.duration <= 7 * 24 * 3600):
            raise ValueError(f"duration must be a positive number of seconds, not {self.duration}")
        for name in ("processes", "max_ops"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        if self.threads < 0 or self.tasks < 0 or self.threads + self.tasks < 1:
            raise ValueError("each process needs at least one thread or task")
        if self.restarts < 0 or self.failovers < 0:
            raise ValueError("restarts and failovers must be >= 0")
        if self.hot < 1 or self.cold < 1 or not self.generation > 0:
            raise ValueError("hot and cold must be >= 1 and generation > 0")


@dataclass
class Result:
    code: int
    verdict: Verdict
    totals: Totals
    report: Path | None
    problems: list[str] = field(default_factory=list)  # why the campaign is not a pass


async def _threaded(ledger: Any, method: str, request_id: str) -> object:
    """A sync ledger's call off the loop; an async one's awaited."""
    if asyncio.iscoroutinefunction(getattr(ledger, method)):
        return await getattr(ledger, method)(request_id)
    return await asyncio.to_thread(getattr(ledger, method), request_id)


async def _final_reads(ledger: Any, ids: list[str]) -> tuple[list[Op], int]:
    """Read every id (bounded passes over the ones whose read raised); (ops, unread)."""
    ops: list[Op] = []
    gate = asyncio.Semaphore(FINAL_CONCURRENCY)

    async def read(request_id: str) -> bool:
        async with gate:
            invoke = time.monotonic_ns()
            value, error = None, None
            try:
                value = await _threaded(ledger, "is_spent", request_id)
            except Exception as exc:
                error = error_line(exc)
            ops.append(Op(FINAL, "is_spent", request_id, invoke, time.monotonic_ns(), value, error))
            return error is None

    pending = ids
    for n in range(FINAL_ROUNDS):
        if n:
            await asyncio.sleep(FINAL_PAUSE)
        done = await asyncio.gather(*(read(i) for i in pending))
        pending = [i for i, ok in zip(pending, done, strict=False) if not ok]
        if not pending:
            break
    return ops, len(pending)


def _store_id(ledger: Any) -> object:
    try:
        return getattr(ledger, "store_id", None)
    except Exception as exc:
        return f"<raised {error_line(exc)}>"


async def _forgotten(ledger: Any, before: object, ids: list[str], who: str) -> list[str]:
    """What ``ledger`` answered for spent ids after the store forgot, under the old id."""
    problems: list[str] = []
    for request_id in ids:
        for method in ("is_spent", "spend"):
            if not callable(getattr(ledger, method, None)):
                continue
            try:
                value = await _threaded(ledger, method, request_id)
            except LedgerError:
                continue  # fail closed
            except Exception as exc:
                problems.append(f"{who}: {method} raised a non-LedgerError: {error_line(exc)}")
                continue
            if _store_id(ledger) != before:
                continue  # it answers as another store: hosts see ledger-changed
            if value is not (method == "is_spent"):  # a spend must lose, a read see it spent
                problems.append(
                    f"{who}: {method}({request_id!r}) returned {value!r} under the old "
                    f"store_id {before!r} (the id was spent before the store forgot)"
                )
    return problems


async def _forget_check(
    factory: Any, hook: Hook, ids: list[str], fresh: str
) -> tuple[str, list[str]]:
    """Forget: old instances fail closed, a new open is a new store (C6)."""
    ctx = LedgerContext(STORE, identity_route, "sync")
    old, close_old = await enter_factory(factory, ctx)
    try:
        before = _store_id(old)
        if not isinstance(before, str):
            return "not applicable: store_id is None (the ledger never proves)", []
        await asyncio.to_thread(hook)
        problems = await _forgotten(old, before, ids, "the ledger opened before the forget")
        try:
            new, close_new = await enter_factory(factory, ctx)
        except LedgerError:
            outcome = "a new open refused the store that forgot"
        else:
            try:
                now = _store_id(new)
                if now == before:
                    problems.append(f"a ledger opened after the forget reports the old {before!r}")
                problems += await _forgotten(new, before, ids, "a ledger opened after the forget")
                try:
                    spent = await _threaded(new, "spend", fresh)
                except LedgerError:
                    spent = None
                if spent is False:
                    problems.append("a ledger opened after the forget refused a fresh id")
                outcome = f"a new open got store_id {now!r}"
            finally:
                await close_new()
    finally:
        with contextlib.suppress(Exception):
            await close_old()
    verdict = "FAILED" if problems else "passed"
    return (
        f"{verdict}: old store_id {before!r}; {len(ids)} spent ids asked before and after; "
        f"{outcome}",
        problems,
    )


class _Restarts:
    """Runs restart (or failover) hooks one at a time on a thread; records each as a
    window."""

    def __init__(self, hook: Hook | None, what: str = "server restart") -> None:
        self.hook = hook
        self.what = what
        self.done = 0  # restarts that completed
        self.tried = 0
        self.windows: list[Window] = []
        self.failures: list[str] = []
        self.thread: threading.Thread | None = None

    def busy(self) -> bool:
        return self.thread is not None and self.thread.is_alive()

    def start(self) -> bool:
        if self.hook is None or self.busy():
            return False
        hook = self.hook

        def run() -> None:
            began = time.monotonic_ns()
            self.tried += 1
            try:
                hook()
            except Exception as exc:
                self.failures.append(f"{self.what} {self.tried} failed: {error_line(exc)}")
            else:
                self.done += 1
            self.windows.append(Window(began, time.monotonic_ns(), self.what))

        self.thread = threading.Thread(target=run, name="torture-hook", daemon=True)
        self.thread.start()
        return True

    def join(self, bound: float) -> None:
        if self.thread is not None:
            self.thread.join(bound)
            if self.thread.is_alive():
                self.failures.append(f"the {self.what} hook was still running after {bound:g} s")


def run(campaign: Campaign, *, err: TextIO, out: TextIO) -> Result:
    """Run ``campaign``; progress on ``err``, the summary on ``out``."""
    campaign.check()
    if campaign.factory is not None:  # hooks the factory carries, unless given
        made = load_factory(campaign.factory)
        campaign = dataclasses.replace(
            campaign,
            restart=campaign.restart or factory_hook(made, "ledger_restart"),
            forget=campaign.forget or factory_hook(made, "ledger_forget"),
            failover=campaign.failover or factory_hook(made, "ledger_failover"),
        )
    loop = asyncio.new_event_loop()  # the conductor's own, for opening and reading
    router = ProxyRouter() if campaign.faults else None
    workdir = Path(tempfile.mkdtemp(prefix="ledger-torture-"))
    try:
        return _run(campaign, loop, router, workdir, err, out)
    finally:
        if router is not None:
            router.close()
        with contextlib.suppress(Exception):
            loop.run_until_complete(loop.shutdown_default_executor())
        loop.close()
        shutil.rmtree(workdir, ignore_errors=True)


def _preflight(loop: asyncio.AbstractEventLoop, factory: Any, route: Any, probe: str) -> object:
    """Open once through the router (creating its proxies) and make one spend; the
    store_id the store had at the start."""

    async def open_and_spend() -> object:
        ledger, close = await enter_factory(factory, LedgerContext(STORE, route, "sync"))
        try:
            value = await _threaded(ledger, "spend", probe)
            if type(value) is not bool:
                raise CampaignError(f"the preflight spend returned {value!r}, not a bool")
            return _store_id(ledger)
        finally:
            await close()

    return loop.run_until_complete(open_and_spend())


def _run(
    campaign: Campaign,
    loop: asyncio.AbstractEventLoop,
    router: ProxyRouter | None,
    workdir: Path,
    err: TextIO,
    out: TextIO,
) -> Result:
    run_id = f"ledger-torture-{secrets.token_hex(4)}"
    seed = campaign.seed if campaign.seed is not None else secrets.randbits(32)
    workload = Workload(
        tag=run_id, hot=campaign.hot, cold=campaign.cold, generation=campaign.generation
    )
    source = Source(campaign.url, campaign.factory, run_id)
    factory = source.factory_callable()
    first = _preflight(loop, factory, router or identity_route, f"{workload.tag}-preflight")
    routes = {p.upstream: p.address for p in router.proxies} if router is not None else {}
    routed = bool(routes)
    events = schedule.build(
        campaign.duration,
        seed=seed,
        faults=routed,
        restarts=campaign.restarts if campaign.restart is not None else 0,
        failovers=campaign.failovers if campaign.failover is not None else 0,
    )
    workers = campaign.processes * (campaign.threads + campaign.tasks)
    per_worker = max(1, math.ceil(campaign.max_ops / workers))
    mp = multiprocessing.get_context("spawn")
    messages: Any = mp.Queue()
    start, stop = mp.Value("q", 0), mp.Value("b", 0)  # never mp.Events (see workers)
    journals = [workdir / f"journal-{n}.jsonl" for n in range(campaign.processes)]
    children = [
        mp.Process(
            target=child_main,
            args=(
                ChildSpec(
                    index=n,
                    source=source,
                    store=STORE,
                    routes=routes,
                    threads=campaign.threads,
                    tasks=campaign.tasks,
                    journal=journals[n],
                    workload=workload,
                    duration=campaign.duration,
                    ops_per_worker=per_worker,
                    seed=seed,
                ),
                messages,
                start,
                stop,
            ),
            name=f"torture-p{n}",
            daemon=True,
        )
        for n in range(campaign.processes)
    ]
    problems: list[str] = []
    progress = Progress(err, every=campaign.progress_every)
    restarts = _Restarts(campaign.restart)
    failovers = _Restarts(campaign.failover, "failover")
    conductor = _Conductor(
        campaign, router, restarts, failovers, children, messages, stop, progress, problems
    )
    start_ns = time.monotonic_ns()
    try:
        for child in children:
            child.start()
        _await_ready(messages, children, problems)
        start_ns = time.monotonic_ns()
        start.value = start_ns
        conductor.conduct(events, start_ns)
    except CampaignError as exc:
        problems.append(str(exc))
    finally:
        progress.end()
        stop.value = 1  # a child still waiting for the go exits at once
        if router is not None:
            router.heal()
        for child in children:
            if child.pid is None:
                continue  # never started
            child.join(campaign.grace)
            if child.is_alive():
                child.kill()
                child.join(10)
        restarts.join(campaign.grace)
        failovers.join(campaign.grace)
    interrupted = conductor.interrupted
    if campaign.restart is not None and not interrupted:
        # A last crash and restart before the final read: every acknowledged spend must
        # survive it too, and a server that a fault left down is up for the read.
        restarts.start()
        restarts.join(campaign.grace)
    problems += restarts.failures + failovers.failures
    end_ns = time.monotonic_ns()
    loaded = load([j for j in journals if j.exists()], end_ns)
    ops = loaded.ops
    spent_ids = sorted({op.key for op in ops if op.kind == "spend"})
    final_ops, unread, last = loop.run_until_complete(_final_read(factory, spent_ids, problems))
    renamed = None
    if failovers.tried and last != first:
        # Another store now: its reads say nothing of the old identity's spends (H5).
        renamed = f"the store_id changed from {first!r} to {last!r}: final read not judged"
        final_ops, unread = [], 0
    ops.extend(final_ops)
    verdict = judge(ops)
    verdict.final_unverified = unread
    if unread:
        problems.append(f"the final read could not read {unread} ids")
    forget_text = None
    if campaign.forget is not None and not interrupted:
        acked = sorted({op.key for op in ops if op.kind == "spend" and op.result is True})
        try:
            forget_text, forget_problems = loop.run_until_complete(
                _forget_check(
                    factory, campaign.forget, acked[:FORGET_SAMPLE], f"{workload.tag}-new"
                )
            )
        except (LedgerError, HookFailed) as exc:
            forget_text, forget_problems = None, []
            problems.append(f"the forget check could not run: {error_line(exc)}")
        problems += forget_problems
    seconds = (end_ns - start_ns) / 1e9
    replies = router.stats.replies_dropped if router is not None else 0
    windows = [*conductor.windows, *restarts.windows, *failovers.windows]
    windows.sort(key=lambda w: w.start_ns)
    totals = Totals(
        seconds=seconds,
        processes=campaign.processes,
        workers=workers,
        faults=len(conductor.windows),
        restarts=restarts.done,
        replies_dropped=replies,
        routed=routed,
        forget=forget_text,
        failovers=failovers.done,
        renamed=renamed,
    )
    lines = summary(verdict, totals)
    hidden = secret_fragments(campaign.url) if campaign.url else []
    problems = [scrub(p, hidden) for p in problems]
    forget_failed = forget_text is not None and forget_text.startswith("FAILED")
    report_path = None
    if verdict.failed or forget_failed:
        report_path = campaign.report or Path.cwd() / f"{run_id}.txt"
        header = [
            f"decision-ledger torture, run {run_id}, seed {seed}",
            *lines,
            *(f"problem: {p}" for p in problems),
        ]
        write_violations(report_path, verdict, header=header, start_ns=start_ns, windows=windows)
    for line in lines:
        print(line, file=out)
    for problem in problems[:20]:
        print(f"problem: {problem}", file=err)
    if verdict.failed or forget_failed:
        code = VIOLATION
        print(f"FAILED: the offending histories are in {report_path}", file=out)
    elif interrupted:
        code = INTERRUPTED
        print("interrupted: no violation in what ran (the summary covers it)", file=out)
    elif problems:
        code = UNAVAILABLE
        print("INCOMPLETE: the campaign could not prove everything (see the problems)", file=out)
    else:
        code = OK
        print(f"passed (seed {seed})", file=out)
    return Result(code, verdict, totals, report_path, problems)


async def _final_read(
    factory: Any, ids: list[str], problems: list[str]
) -> tuple[list[Op], int, object]:
    """A fresh ledger, opened around the proxy, reads every id that saw a spend (a store
    that cannot be opened leaves every id unread: said, never guessed); with the
    store_id it reports."""
    ledger, failure = None, ""
    for n in range(FINAL_ROUNDS):
        if n:
            await asyncio.sleep(FINAL_PAUSE)
        try:
            ledger, close = await enter_factory(
                factory, LedgerContext(STORE, identity_route, "sync")
            )
            break
        except LedgerError as exc:
            failure = error_line(exc)
    if ledger is None:
        problems.append(f"the final read could not open the ledger: {failure}")
        return [], len(ids), None
    try:
        return (*await _final_reads(ledger, ids), _store_id(ledger))
    finally:
        await close()


def _await_ready(messages: Any, children: list[Any], problems: list[str]) -> None:
    ready: set[int] = set()
    deadline = time.monotonic() + READY_BOUND
    while len(ready) < len(children):
        left = deadline - time.monotonic()
        if left <= 0:
            raise CampaignError(f"workers not ready within {READY_BOUND:g} s")
        try:
            kind, index, payload = messages.get(timeout=min(left, 1.0))
        except queues.Empty:
            if any(c.exitcode is not None for c in children):
                raise CampaignError("a worker process exited before it was ready") from None
            continue
        if kind == "ready":
            ready.add(index)
        elif kind == "error":
            raise CampaignError(f"worker p{index} could not start: {payload}")


@contextlib.contextmanager
def _ctrl_c_counted() -> Iterator[list[int]]:
    """Ctrl-C counted, not raised, while the conductor reads its workers' messages: a
    KeyboardInterrupt inside a multiprocessing queue read can cut a message in half."""
    count = [0]
    if threading.current_thread() is not threading.main_thread():
        yield count
        return

    def on_sigint(signum: int, frame: object) -> None:
        count[0] += 1

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield count
    finally:
        signal.signal(signal.SIGINT, previous)


@dataclass
class _Conductor:
    """What the conductor keeps track of while the workers run; :meth:`conduct` drives
    the schedule and reads the workers' messages."""

    campaign: Campaign
    router: ProxyRouter | None
    restarts: _Restarts
    failovers: _Restarts
    children: list[Any]
    messages: Any
    stop: Any  # the shared value that tells the workers to end
    progress: Progress
    problems: list[str]
    windows: list[Window] = field(default_factory=list)  # the faults, once lifted
    stats: dict[int, dict[str, Any]] = field(default_factory=dict)  # per worker process
    finished: set[int] = field(default_factory=set)
    current: tuple[int, str] | None = None  # (start_ns, what) of the fault now on
    injected: int = 0
    interrupted: bool = False  # stopped by Ctrl-C

    def conduct(self, events: list[schedule.Event], start_ns: int) -> None:
        """Drive the schedule until every worker is done."""
        pending = list(events)
        hard_end = start_ns + int((self.campaign.duration + self.campaign.grace) * 1e9)
        with _ctrl_c_counted() as ctrl_c:
            while len(self.finished) < len(self.children):
                if ctrl_c[0] > 1:
                    break  # a second Ctrl-C: stop waiting for calls in flight
                if ctrl_c[0] and not self.interrupted:
                    self.interrupted = True
                    self.stop.value = 1
                    if self.router is not None:
                        self.router.heal()
                now = time.monotonic_ns()
                if now > hard_end:
                    self.problems.append("workers still in a call after the grace period (killed)")
                    break
                elapsed = (now - start_ns) / 1e9
                while pending and pending[0].at <= elapsed and not self.stop.value:
                    self._apply(pending.pop(0))
                self._receive()
                self._show(elapsed)
        self._lift()

    def _apply(self, event: schedule.Event) -> None:
        if event.restart or event.failover:
            (self.restarts if event.restart else self.failovers).start()
            return
        assert self.router is not None
        assert event.toxic is not None
        self.router.set(event.toxic, latency=event.latency)
        self._lift()
        if event.toxic is not Toxic.PASS:
            self.current = (time.monotonic_ns(), event.describe())
            self.injected += 1

    def _lift(self) -> None:
        """The fault now on has ended: it becomes a window."""
        if self.current is not None:
            self.windows.append(Window(self.current[0], time.monotonic_ns(), self.current[1]))
            self.current = None

    def _receive(self) -> None:
        """One message from a worker; after a quiet tick, the workers that died."""
        try:
            kind, index, payload = self.messages.get(timeout=TICK)
        except queues.Empty:
            for n, child in enumerate(self.children):
                if child.exitcode not in (None, 0) and n not in self.finished:
                    self.problems.append(f"worker p{n} exited with status {child.exitcode}")
                    self.finished.add(n)
            return
        if kind == "stats":
            self.stats[index] = payload
        elif kind == "done":
            self.finished.add(index)
        elif kind == "error":
            self.problems.append(f"worker p{index} failed: {payload}")
            self.finished.add(index)

    def _show(self, elapsed: float) -> None:
        ops = sum(s["counts"].get("ops", 0) for s in self.stats.values())
        errors: Counter[str] = Counter()
        for s in self.stats.values():
            errors.update(s["errors"])
        if self.restarts.busy():
            state = "restarting"
        elif self.failovers.busy():
            state = "failing over"
        else:
            state = self.current[1] if self.current else "calm"
        self.progress.update(
            elapsed, self.campaign.duration, ops, self.injected, self.restarts.done, errors, state
        )
