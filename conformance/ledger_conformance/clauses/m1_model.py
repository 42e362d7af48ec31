"""M1: random sequences of operations against a reference model, shrunk when one fails.

Each clause above tries the sequences someone thought of. This one lets Hypothesis
generate them: spends, reads, ``spend_as``, ``spend_many`` / ``is_spent_many`` (each
where offered), closing and reopening an instance, opening another, a call from a newly
spawned interpreter, and the restart hook (when given), over two stores that share their
ids. The model is a set of spent ids per store, with the attempt key that holds each;
a call that raised a ``LedgerError`` is indeterminate (it may have landed or not, as in
Jepsen and Porcupine) until a later answer settles it. Every answer is held to the model,
and every recorded spend and read to the per-key history checker. A failure is shrunk to
the shortest sequence Hypothesis finds and shown in the report.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, ParamSpec, TypeVar

import pytest
from hypothesis import HealthCheck, Phase, seed, settings
from hypothesis import strategies as st
from hypothesis.errors import Flaky
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from ledger_core.errors import LedgerError

from ..axes import seed_note
from ..callers import UNPORTABLE, CallerFailed, NotOpened, Raised, portable
from ..context import Flavor
from ..declare import FORGET, RESTART, SPEND_AS, SPEND_MANY, declare
from ..harness import KEY_SEPARATOR, Handle, Ledgers, describe_violations, error_text
from ..history import Op, OpKind, Recording, check
from ..hooks import takes_namespace
from .c6_forget import forget_now, store_id_now
from .c10_reentry import new_keys
from .common import note, open_flavor, partly, sample
from .drawn import axes_of, in_new_interpreter

M1 = declare("M1", "model: random operation sequences agree with a reference model")

STORES = 2  # stores in one sequence: the same ids on each (isolation is part of the model)
IDS = 3  # ids per sequence: few, so operations meet on them
KEYS = 3  # attempt keys per sequence
INSTANCES = 3  # instances per store, at most
PLAIN = ""  # the holder of an id a plain spend recorded (no key re-enters it)
UNKNOWN = "?"  # spent, by an attempt whose answer was lost
AS_WRITE = "spend_as: a write whose True may be a re-entry"  # its op in the history
STALE = " (opened before the store forgot)"  # its calls: held to C6, not to the checker


P = ParamSpec("P")
T = TypeVar("T")

STALE_WRITE = "opened before the store forgot: its write may have landed in the new store"


def judged(ops: list[Op]) -> list[Op]:
    """The ops the history checker holds: a stale instance's answers may be the old
    store's (only C6 holds them), but a spend of it that raised or said ``True`` may have
    written into the new store first (a write, then the identity proof that fails), so it
    stays as a spend that may have landed, never as an answer."""
    kept = []
    for op in ops:
        if STALE not in op.process:
            kept.append(op)
        elif op.kind == "spend" and (op.error is not None or op.result is True):
            kept.append(replace(op, result=None, error=STALE_WRITE))
    return kept


@dataclass
class Store:
    """The model of one store: who holds each spent id, and which spends may have landed."""

    label: str
    handles: list[Handle]
    holder: dict[str, str] = field(default_factory=dict)
    maybe: set[str] = field(default_factory=set)
    before: set[str] = field(default_factory=set)  # ids that may have been spent before a forget
    stale: dict[Handle, object] = field(default_factory=dict)  # opened before it: its store_id

    def forget(self) -> None:
        """The store forgot: a new store under the same label, its old instances stale."""
        self.before = set(self.holder) | self.maybe
        self.holder, self.maybe = {}, set()
        self.stale = {handle: store_id_now(handle) for handle in self.handles}

    def expect_spend(self, request_id: str, key: str) -> bool | None:
        """What ``spend`` (``key`` PLAIN) or ``spend_as`` must answer; None: either."""
        held = self.holder.get(request_id)
        if held is None:
            return None if request_id in self.maybe else True
        if held == UNKNOWN:
            return None if key != PLAIN else False
        return key != PLAIN and held == key

    def spent(self, request_id: str, key: str, answer: bool) -> None:
        if answer and self.holder.get(request_id, UNKNOWN) == UNKNOWN:
            self.holder[request_id] = key
        elif not answer and request_id in self.maybe and request_id not in self.holder:
            self.holder[request_id] = UNKNOWN  # refused: something landed

    def expect_read(self, request_id: str) -> bool | None:
        if request_id in self.holder:
            return True
        return None if request_id in self.maybe else False

    def read(self, request_id: str, answer: bool) -> None:
        if answer and request_id not in self.holder:
            self.holder[request_id] = UNKNOWN


@dataclass
class Run:
    """What one test gives every sequence it generates."""

    ledgers: Ledgers
    flavor: Flavor
    restart: Callable[[], object] | None
    forget: Callable[..., object] | None
    spawn: bool
    spend_as: bool
    batches: bool
    reads: bool  # the ledger has is_spent
    counter: itertools.count[int] = field(default_factory=itertools.count)
    done: dict[str, int] = field(default_factory=dict)  # rule -> times run, for the report
    first: BaseException | None = None  # the first failure of any step

    def count(self, rule: str) -> None:
        self.done[rule] = self.done.get(rule, 0) + 1

    def recorded(self, step: Callable[P, T]) -> Callable[P, T]:
        """``step``, keeping the first failure: when a replay of a failing sequence fails
        elsewhere (a store that answers differently under load), Hypothesis reports only
        that its replay differed, and the report shows this one instead."""

        @functools.wraps(step)
        def recording(*args: P.args, **kwargs: P.kwargs) -> T:
            try:
                return step(*args, **kwargs)
            except BaseException as exc:
                if self.first is None:
                    self.first = exc
                raise

        return recording


def _machine(run: Run) -> type[RuleBasedStateMachine]:
    ledgers = run.ledgers
    indices = st.integers(0, IDS - 1)
    stores = st.integers(0, STORES - 1)
    instances = st.integers(0, INSTANCES - 1)
    keys = st.integers(0, KEYS - 1)
    batch = st.lists(indices, min_size=1, max_size=IDS, unique=True)

    class Model(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            n = next(run.counter)
            run.count("sequences")
            self.ids = ledgers.ids(IDS, f"model{n}")
            self.keys = new_keys(KEYS)
            self.stores = [
                Store(label, [open_flavor(ledgers, label, run.flavor)])
                for label in (ledgers.label(f"model{n}-{s}") for s in range(STORES))
            ]
            self.restarted = self.forgot = False
            self.start = len(ledgers.history)
            self.since: dict[str, int] = {}  # label -> where its history starts again

        # -- the operations -------------------------------------------------------------
        @rule(s=stores, i=instances, n=indices)
        @run.recorded
        def spend(self, s: int, i: int, n: int) -> None:
            store, handle, who = self._pick(s, i)
            request_id = self.ids[n]
            answer = self._answer(who, "spend", request_id, lambda: handle.spend(request_id, who))
            self._spent(store, who, "spend", request_id, PLAIN, answer, handle)

        @rule(s=stores, i=instances, n=indices)
        @run.recorded
        def is_spent(self, s: int, i: int, n: int) -> None:
            store, handle, who = self._pick(s, i)
            if not handle.has_is_spent:
                return
            request_id = self.ids[n]
            answer = self._answer(
                who, "is_spent", request_id, lambda: handle.is_spent(request_id, who)
            )
            self._read(store, who, request_id, answer, handle)

        @precondition(lambda self: run.spend_as)
        @rule(s=stores, i=instances, n=indices, k=keys)
        @run.recorded
        def spend_as(self, s: int, i: int, n: int, k: int) -> None:
            store, handle, who = self._pick(s, i)
            request_id, key = self.ids[n], self.keys[k]
            what = f"spend_as({request_id!r}, key {k})"
            invoke = time.monotonic_ns()
            answer = self._answer(
                who, what, request_id, lambda: handle.call("spend_as", request_id, key)
            )
            self._wrote_as(store, who, request_id, invoke, time.monotonic_ns())
            self._spent(store, who, what, request_id, key, answer, handle)

        @precondition(lambda self: run.batches)
        @rule(s=stores, i=instances, ns=batch)
        @run.recorded
        def spend_many(self, s: int, i: int, ns: list[int]) -> None:
            store, handle, who = self._pick(s, i)
            ids = [self.ids[n] for n in ns]
            answers = self._batch(handle, who, "spend", "spend_many", ids)
            for request_id, answer in zip(ids, answers, strict=True):
                self._spent(store, who, "spend_many", request_id, PLAIN, answer, handle)

        @precondition(lambda self: run.batches)
        @rule(s=stores, i=instances, ns=batch)
        @run.recorded
        def is_spent_many(self, s: int, i: int, ns: list[int]) -> None:
            store, handle, who = self._pick(s, i)
            ids = [self.ids[n] for n in ns]
            answers = self._batch(handle, who, "is_spent", "is_spent_many", ids)
            for request_id, answer in zip(ids, answers, strict=True):
                self._read(store, who, request_id, answer, handle)

        @rule(s=stores, i=instances)
        @run.recorded
        def reopen(self, s: int, i: int) -> None:
            """Close an instance and open a new one in its place."""
            store = self.stores[s]
            i %= len(store.handles)
            ledgers.close_handle(store.handles[i])
            run.count("reopens")
            store.handles[i] = open_flavor(ledgers, store.label, run.flavor)

        @precondition(lambda self: any(len(s.handles) < INSTANCES for s in self.stores))
        @rule(s=stores)
        @run.recorded
        def open_another(self, s: int) -> None:
            store = self.stores[s]
            if len(store.handles) < INSTANCES:
                store.handles.append(open_flavor(ledgers, store.label, run.flavor))

        @precondition(lambda self: run.spawn)
        @rule(s=stores, n=indices, op=st.sampled_from(["spend", "is_spent", "spend_as"]), k=keys)
        @run.recorded
        def in_a_new_interpreter(self, s: int, n: int, op: str, k: int) -> None:
            store = self.stores[s]
            request_id, key = self.ids[n], self.keys[k]
            if (op == "spend_as" and not run.spend_as) or (op == "is_spent" and not run.reads):
                op = "spend"
            args: tuple[object, ...] = (request_id, key) if op == "spend_as" else (request_id,)
            who = f"a new interpreter (store {s})"
            run.count("calls from a new interpreter")
            try:
                got, invoke, complete = in_new_interpreter(
                    ledgers, who, store.label, run.flavor, op, args
                )
            except NotOpened as exc:
                raise AssertionError(f"{who} could not open the store: {exc}") from None
            error = got.error if isinstance(got, Raised) else None
            if op == "spend_as":
                self._wrote_as(store, who, request_id, invoke, complete)
            elif error is None:
                kind: OpKind = "spend" if op == "spend" else "is_spent"
                key_ = f"{store.label}{KEY_SEPARATOR}{request_id}"
                done = Op(who, kind, key_, invoke, complete, got, None)
                ledgers.add(store.label, request_id, done)
            assert not isinstance(got, Raised) or got.ledger_error, (
                f"{who}: {op} raised {error}, not a LedgerError"
            )
            answer = error or self._settled(who, op, got)
            if op == "is_spent":
                self._read(store, who, request_id, answer)
            else:
                self._spent(store, who, op, request_id, key if op == "spend_as" else PLAIN, answer)

        @precondition(lambda self: run.restart is not None and not self.restarted)
        @rule()
        @run.recorded
        def restart_the_server(self) -> None:
            assert run.restart is not None
            self.restarted = True
            run.count("restarts")
            try:
                run.restart()
            except Exception as exc:  # a broken hook is no ledger's failure: no shrinking
                pytest.fail(f"the restart hook failed: {error_text(exc)}", pytrace=False)

        @precondition(lambda self: run.forget is not None and not self.forgot)
        @rule(s=stores)
        @run.recorded
        def forget_the_store(self, s: int) -> None:
            """The store forgets (told its namespace when the hook takes one, else the
            whole store: both stores)."""
            assert run.forget is not None
            self.forgot = True
            run.count("forgets")
            if takes_namespace(run.forget):
                forget_now(ledgers, run.forget, ledgers.namespace(self.stores[s].label))
                forgotten = [self.stores[s]]
            else:
                forget_now(ledgers, run.forget)
                forgotten = self.stores
            for store in forgotten:
                store.forget()
                self.since[store.label] = len(ledgers.history)  # a new store: checked anew

        @invariant()
        @run.recorded
        def history_is_linearizable(self) -> None:
            ops = [
                op
                for n, op in enumerate(ledgers.history.ops[self.start :], self.start)
                if n >= self.since.get(op.key.partition(KEY_SEPARATOR)[0], 0)
            ]
            violations = check(judged(ops))
            assert not violations, describe_violations(violations)

        def teardown(self) -> None:
            for store in self.stores:
                for handle in store.handles:
                    ledgers.close_handle(handle)

        # -- helpers ----------------------------------------------------------------------
        def _pick(self, s: int, i: int) -> tuple[Store, Handle, str]:
            store = self.stores[s]
            i %= len(store.handles)
            handle = store.handles[i]
            return (
                store,
                handle,
                f"store {s} instance {i}" + (STALE if handle in store.stale else ""),
            )

        def _answer(self, who: str, what: str, request_id: str, call: Callable[[], object]) -> Any:
            try:
                value = call()
            except LedgerError as exc:
                return exc
            return self._settled(who, what, value)

        def _settled(self, who: str, what: str, value: object) -> object:
            """The answer; a value that is not a bool fails."""
            assert isinstance(value, bool), f"{who}: {what} returned {value!r}, not a bool"
            return value

        def _batch(
            self, handle: Handle, who: str, kind: OpKind, method: str, ids: list[str]
        ) -> list[object]:
            """A batch call, recorded as one op per id over the batch's whole time."""
            ops: list[Op] = []

            def sink(op: Op) -> None:
                ops.append(op)

            recording = Recording(sink, who, kind, "", catch=LedgerError)
            with contextlib.suppress(LedgerError), recording:  # recorded as raised
                recording.value = handle.call(method, ids)
            (op,) = ops
            if op.error is not None:
                answers: list[object] = [op.error] * len(ids)
            else:
                value = op.result
                shape = f"{who}: {method} of {len(ids)} ids returned {value!r}, not a list"
                assert isinstance(value, list), shape
                assert len(value) == len(ids), shape
                answers = [self._settled(who, method, v) for v in value]
            for request_id, answer in zip(ids, answers, strict=True):
                ledgers.add(
                    handle.label,
                    request_id,
                    Op(
                        who,
                        kind,
                        handle.key(request_id),
                        op.invoke_ns,
                        op.complete_ns,
                        None if isinstance(answer, str) else answer,
                        answer if isinstance(answer, str) else None,
                    ),
                )
            return answers

        def _wrote_as(
            self, store: Store, who: str, request_id: str, invoke: int, complete: int
        ) -> None:
            """A ``spend_as`` goes to the history checker as a spend that may have
            recorded the id (a re-entering True is not a second winner): the checker then
            holds every read and plain spend around it; the model holds its answer."""
            key = f"{store.label}{KEY_SEPARATOR}{request_id}"
            ledgers.history.add(Op(who, "spend", key, invoke, complete, None, AS_WRITE))

        def _spent(
            self,
            store: Store,
            who: str,
            what: str,
            request_id: str,
            key: str,
            answer: object,
            handle: Handle | None = None,
        ) -> None:
            if not isinstance(answer, bool) or self._stale(
                store, handle, who, what, request_id, answer is True and key == PLAIN
            ):
                store.maybe.add(request_id)
                return
            expected = store.expect_spend(request_id, key)
            assert expected is None or answer is expected, (
                f"{who}: {what} of {request_id!r} answered {answer}; the model says {expected} "
                f"({_why(store, request_id)})"
            )
            store.spent(request_id, key, answer)

        def _read(
            self,
            store: Store,
            who: str,
            request_id: str,
            answer: object,
            handle: Handle | None = None,
        ) -> None:
            what = "is_spent"
            if not isinstance(answer, bool) or self._stale(
                store, handle, who, what, request_id, answer is False
            ):
                return
            expected = store.expect_read(request_id)
            assert expected is None or answer is expected, (
                f"{who}: is_spent({request_id!r}) answered {answer}; the model says {expected} "
                f"({_why(store, request_id)})"
            )
            store.read(request_id, answer)

        def _stale(
            self,
            store: Store,
            handle: Handle | None,
            who: str,
            what: str,
            request_id: str,
            wrong: bool,
        ) -> bool:
            """Whether ``handle`` was opened before its store forgot, so only C6 holds its
            answer: under the old store_id, never a True spend or a False read of an id
            spent before. Once it names another store_id it is the new store's."""
            if handle is None or handle not in store.stale:
                return False
            if store_id_now(handle) != store.stale[handle]:
                del store.stale[handle]
                return True  # this answer may still be the old store's: not judged
            assert not (wrong and request_id in store.before), (
                f"{who}: {what} of {request_id!r}, spent before the store forgot, answered "
                f"{what != 'is_spent'} under the old store_id "
                f"{store.stale[handle]!r} (C6: the store forgot, the ledger kept answering)"
            )
            return True

    return Model


def _why(store: Store, request_id: str) -> str:
    held = store.holder.get(request_id)
    if held is None:
        return "no call of this sequence spent it in this store"
    if held == PLAIN:
        return "a plain spend or a batch recorded it"
    if held == UNKNOWN:
        return "an earlier answer showed it spent"
    return "a spend_as recorded it"


def _unspawnable(ledgers: Ledgers, first: Handle) -> str | None:
    """Why no call can come from a new interpreter, or None: one of the run's spawned
    interpreters is asked once (started if need be), so the sequences pay no start-up."""
    if first.store_id is None:
        return "store_id is None (the ledger promises nothing across processes)"
    if portable(ledgers.factory) is None:
        return UNPORTABLE
    probe = (ledgers.ids(1, "spawned")[0],)
    try:
        in_new_interpreter(ledgers, "a new interpreter", first.label, first.flavor, "spend", probe)
    except NotOpened as exc:
        return f"the new interpreter could not open the store: {exc}"
    except CallerFailed as exc:
        return f"the new interpreter did not start: {exc}"
    return None


_NOT_STEPS = ("state.history_is_linearizable(", "state.teardown(")


def _shrunk(exc: BaseException) -> str:
    """Hypothesis's shrunk sequence (its notes), one step per line, for the report."""
    notes = [str(n) for n in getattr(exc, "__notes__", ())]
    steps = [
        line.strip()
        for note in notes
        for line in note.splitlines()
        if line.strip().startswith("state.") and not line.strip().startswith(_NOT_STEPS)
    ]
    return "; ".join(steps)


def unreplayed(run: Run, flaky: Flaky) -> str:
    """What a sequence whose replay went otherwise found first (not shrunk)."""
    if run.first is None:
        return f"Hypothesis could not replay a sequence: {flaky}"
    return (
        f"{error_text(run.first)}\n(not shrunk: replaying the sequence went otherwise, "
        f"{type(flaky).__name__}: the store answered differently the second time)"
    )


def _sequences(
    request: pytest.FixtureRequest,
    ledgers: Ledgers,
    flavor: Flavor,
    examples: int,
    restart: Callable[[], object] | None = None,
    forget: Callable[..., object] | None = None,
) -> None:
    """Run the generated sequences; a failure is raised with the shrunk sequence."""
    first = open_flavor(ledgers, ledgers.label("model-probe"), flavor)
    unsent = _unspawnable(ledgers, first)
    if unsent is not None:
        partly(request, f"no call from a new interpreter: {unsent}")
    batches = callable(getattr(first.ledger, "is_spent_many", None))
    run = Run(
        ledgers,
        flavor,
        restart,
        forget,
        spawn=unsent is None,
        spend_as=first.has(SPEND_AS),
        batches=first.has(SPEND_MANY) and batches,
        reads=first.has_is_spent,
    )
    hooked = restart is not None or forget is not None
    generated = settings(
        # Shrinking replays a sequence many times, and a hook in it as often (a server
        # restart costs seconds, and the store is never the same twice): hook sequences,
        # at most model_steps long, are shown as they failed.
        # (Hypothesis's explain phase replays it more still, for a note of covered lines.)
        phases=[Phase.explicit, Phase.generate] + ([] if hooked else [Phase.shrink]),
        max_examples=examples,
        stateful_step_count=ledgers.profile.model_steps,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=False,
    )
    axes = axes_of(ledgers)  # the run's seed draws the sequences: a failure replays
    machine = seed(axes.part_seed(f"M1:{request.node.name}"))(_machine(run))
    try:
        run_state_machine_as_test(machine, settings=generated)
    except AssertionError as exc:
        steps = _shrunk(exc)
        text = f"{exc}\nShrunk to: {steps}" if steps else str(exc)
        raise AssertionError(f"{text}\n[{seed_note(axes)}]") from None
    except Flaky as exc:
        raise AssertionError(f"{unreplayed(run, exc)}\n[{seed_note(axes)}]") from run.first
    done = ", ".join(f"{n} {what}" for what, n in run.done.items())
    note(request, f"{request.node.name}: {done}")


class M1Model:
    @pytest.fixture
    def ledger_model_examples(self) -> int | None:
        """How many sequences M1 generates; ``None`` takes the profile's number. A
        backend's test class may lower it (say why in a comment): the report says so."""
        return None

    @M1()
    @pytest.mark.parametrize("flavor", ["sync", "async"])
    def test_M1_random_sequences_agree_with_the_model(
        self,
        request: pytest.FixtureRequest,
        ledgers: Ledgers,
        flavor: Flavor,
        ledger_model_examples: int | None,
    ) -> None:
        """Generated sequences of every operation the ledger offers, checked call by call
        against the model and the history checker; a failure shows the shrunk sequence."""
        given = ledger_model_examples
        examples = sample(request, ledgers, "model_examples", "ledger_model_examples", given)
        _sequences(request, ledgers, flavor, examples)

    @M1(RESTART)
    @pytest.mark.parametrize("flavor", ["sync", "async"])
    def test_M1_sequences_across_restarts(
        self,
        request: pytest.FixtureRequest,
        ledgers: Ledgers,
        flavor: Flavor,
        ledger_restart: Callable[[], object] | None,
    ) -> None:
        """The same, with the server restarted once in a sequence (a few sequences: a
        restart costs seconds on some servers)."""
        examples = ledgers.profile.model_hook_examples
        _sequences(request, ledgers, flavor, examples, restart=ledger_restart)

    @M1(FORGET)
    @pytest.mark.ledger_forgets
    @pytest.mark.parametrize("flavor", ["sync", "async"])
    def test_M1_sequences_across_forgets(
        self,
        request: pytest.FixtureRequest,
        ledgers: Ledgers,
        flavor: Flavor,
        ledger_forget: Callable[..., object] | None,
    ) -> None:
        """The same, with a store forgetting once in a sequence (its namespace, or the
        whole store): instances opened before it are held to C6 (never a True spend or
        a False read of an id spent before, under the old store_id); the rest to a new
        model of a new store. Runs with the other forget clauses, last."""
        examples = ledgers.profile.model_hook_examples
        _sequences(request, ledgers, flavor, examples, forget=ledger_forget)
