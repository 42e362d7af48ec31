"""C6 after forget: a store that forgot is a new store; no instance answers for it under
the old ``store_id``.

A ledger that checks its identity once, on a timer, per table instead of per namespace,
or in a round trip of its own, keeps the old ``store_id`` and spends an already-run
request again. After a forget, ``spend(old id)`` returning ``True`` or ``is_spent(old id)``
returning ``False`` while the instance reports the old ``store_id`` is a violation; a
``LedgerError`` is fine. These clauses call the forget hook, so they run last.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from functools import partial

import pytest

from ledger_core.errors import LedgerError

from ..context import Flavor
from ..declare import FORGET
from ..harness import Handle, Ledgers, error_text
from ..hooks import FORGET_NAMESPACE_ENV, forget_namespace, takes_namespace
from .c6_identity import C6
from .common import expect_bool, not_applicable, not_exercised, note, open_both, open_flavor, partly

OLD_IDS = 10
Forget = Callable[[], object] | None


def store_id_now(handle: Handle) -> object:
    try:
        return handle.store_id
    except Exception as exc:  # a ledger may refuse to name an identity it lost
        return f"<raised {error_text(exc)}>"


def run_hook(ledgers: Ledgers, hook: Callable[[], object], what: str = "forget") -> None:
    """Run a hook that may lose the run's earlier spends; a failing hook fails the test."""
    ledgers.runtime.forgot = True
    try:
        hook()
    except Exception as exc:
        pytest.fail(f"the {what} hook failed: {error_text(exc)}", pytrace=False)


def forget_now(
    ledgers: Ledgers, forget: Callable[..., object], namespace: str | None = None
) -> None:
    """Run the forget hook (for one namespace when given)."""
    run_hook(ledgers, forget if namespace is None else partial(forget_namespace, forget, namespace))


def spent_store(ledgers: Ledgers, handles: list[Handle], tag: str = "old") -> tuple[str, list[str]]:
    """The store's ``store_id`` (the same on every handle) and OLD_IDS ids spent on it."""
    if handles[0].store_id is None:
        not_applicable("store_id is None: the ledger never proves, so no old identity can lie")
    first = handles[0].store_id
    assert isinstance(first, str), f"store_id must be a str or None, not {first!r}"
    for handle in handles[1:]:
        assert handle.store_id == first, "the variants report different store_ids"
    ids = ledgers.ids(OLD_IDS, tag)
    for request_id in ids:
        assert expect_bool(handles[0].call("spend", request_id), "spend") is True
    for handle in handles:
        if handle.has_is_spent:
            assert handle.call("is_spent", ids[0]) is True, "a spent id reads unspent"
    return first, ids


def _setup(ledgers: Ledgers, forget: Forget) -> tuple[str, list[Handle], str, list[str]]:
    """Open every variant on a new store, spend ids, then make the store forget."""
    assert forget is not None  # the FORGET need skipped the test otherwise
    label = ledgers.label()
    old = open_both(ledgers, label)
    first, ids = spent_store(ledgers, old)
    forget_now(ledgers, forget)
    return label, old, first, ids


FORGOT = "the id was spent before the store forgot"


def answers_for_forgotten(
    handle: Handle,
    first: str,
    ids: list[str],
    who: str,
    reads_only: bool = False,
    why: str = FORGOT,
) -> list[str]:
    """What ``handle`` answered for the forgotten ids under the old ``store_id``
    (``reads_only``: is_spent alone, when the ledger has it)."""
    problems: list[str] = []
    calls = (["is_spent"] if handle.has_is_spent else []) + ["spend"]
    if reads_only and handle.has_is_spent:
        calls = ["is_spent"]
    for request_id in ids:
        for method in calls:
            before = store_id_now(handle)
            try:
                value = handle.call(method, request_id)
            except LedgerError:
                continue  # fail closed: the ledger noticed
            except Exception as exc:
                problems.append(f"{who}: {method} raised a non-LedgerError: {error_text(exc)}")
                continue
            after = store_id_now(handle)
            if first not in (before, after):
                continue  # it answers as another store: a host sees ledger-changed (H5)
            if not isinstance(value, bool):
                problems.append(f"{who}: {method}({request_id!r}) returned {value!r}, not a bool")
            elif value is (method == "spend"):  # a spend that won, or a read of unspent
                problems.append(
                    f"{who}: {method}({request_id!r}) returned {value} under the old store_id "
                    f"{first!r}: {why}"
                )
    return problems


def verdict(problems: list[str], what: str = "the store forgot") -> None:
    assert not problems, (
        f"{what}, and the ledger kept answering under its old identity: "
        + "\n  ".join(problems[:10])
    )


def new_instance_problems(
    ledgers: Ledgers, label: str, flavors: list[Flavor], first: str, ids: list[str]
) -> list[str]:
    """A new instance of each flavor on the forgotten store: another store_id, working,
    or a refusal that says why."""
    problems: list[str] = []
    for flavor in flavors:
        who = f"a {flavor} instance opened after the forget"
        try:
            fresh = ledgers.open(label, flavor)
        except LedgerError as exc:
            if not str(exc).strip():
                problems.append(f"{who}: the open raised {type(exc).__name__} with no reason")
            continue  # refusing to open a store that forgot is fail-closed
        now = store_id_now(fresh)
        if now == first:
            problems.append(
                f"{who} reports the old store_id {first!r}: a store that forgot is a new "
                "store and needs a new identity"
            )
        problems += answers_for_forgotten(fresh, first, ids, who)
        new_id = ledgers.ids(1, f"new-{flavor}")[0]
        try:
            spent = fresh.call("spend", new_id)
        except LedgerError as exc:
            if not str(exc).strip():
                problems.append(f"{who}: a spend raised {type(exc).__name__} with no reason")
            continue  # refuses the forgotten store with a reason: fail closed
        if spent is not True:
            problems.append(f"{who}: spending a fresh id returned {spent!r}, not True")
    return problems


def _still_spent(ledgers: Ledgers, label: str, ids: list[str]) -> bool:
    """Whether every id reads spent on a new instance of ``label`` (a raise is "no")."""
    try:
        handle = ledgers.open(label)
        return all(handle.reads_spent(request_id) for request_id in ids)
    except LedgerError:
        return False


class C6Forget:
    @C6(FORGET)
    @pytest.mark.ledger_forgets
    def test_C6_forgotten_store_old_instance(self, ledgers: Ledgers, ledger_forget: Forget) -> None:
        """Instances opened before the forget fail closed (or answer as another store)."""
        _, old, first, ids = _setup(ledgers, ledger_forget)
        problems: list[str] = []
        for handle in old:
            who = f"the {handle.flavor} instance opened before the forget"
            problems += answers_for_forgotten(handle, first, ids, who)
        verdict(problems)

    @C6(FORGET)
    @pytest.mark.ledger_forgets
    def test_C6_forgotten_store_new_instance(self, ledgers: Ledgers, ledger_forget: Forget) -> None:
        """A new instance is a new store (another store_id, working), or refuses clearly."""
        label, old, first, ids = _setup(ledgers, ledger_forget)
        flavors = list(dict.fromkeys(h.flavor for h in old))
        verdict(new_instance_problems(ledgers, label, flavors, first, ids))

    @C6(FORGET)
    @pytest.mark.ledger_forgets
    @pytest.mark.parametrize("scope", ["store", "namespace"])
    @pytest.mark.parametrize("flavor", ["sync", "async"])
    def test_C6_forget_immediate(
        self,
        ledgers: Ledgers,
        ledger_forget: Forget,
        flavor: Flavor,
        scope: str,
        request: pytest.FixtureRequest,
    ) -> None:
        """The old instance keeps reading while the hook runs, then reads and spends at
        once after it: a ledger that trusts a checked identity for a while (a re-check on
        a timer) answers from the forgotten store under the old store_id."""
        assert ledger_forget is not None
        if scope == "namespace" and not takes_namespace(ledger_forget):
            not_exercised("the forget hook takes no namespace (see the one-namespace form)")
        label = ledgers.label(f"immediate-{flavor}-{scope}")
        handle = open_flavor(ledgers, label, flavor)
        first, ids = spent_store(ledgers, [handle])
        who = f"the {flavor} instance calling through the forget"
        problems: list[str] = []
        raced = [0]
        stop = threading.Event()

        def race() -> None:
            while not stop.is_set():
                for request_id in ids:
                    problems.extend(answers_for_forgotten(handle, first, [request_id], who, True))
                    raced[0] += 1
                    if stop.is_set():
                        return

        racer = threading.Thread(target=race, name="ledger-suite-racer", daemon=True)
        racer.start()
        began = time.monotonic()
        try:
            forget_now(
                ledgers, ledger_forget, ledgers.namespace(label) if scope != "store" else None
            )
        finally:
            took = time.monotonic() - began
            stop.set()
            racer.join(ledgers.profile.settle)
        assert not racer.is_alive(), "a call racing the forget did not finish"
        problems += answers_for_forgotten(handle, first, ids, f"the {flavor} instance")
        note(
            request,
            f"immediate forget ({flavor}, {scope}): {raced[0]} call(s) during a {took:.3f} s hook",
        )
        verdict(problems)

    @C6(FORGET)
    @pytest.mark.ledger_forgets
    def test_C6_forget_one_namespace(
        self, ledgers: Ledgers, ledger_forget: Forget, request: pytest.FixtureRequest
    ) -> None:
        """One namespace forgets (its records and whatever lives with them) while a
        sibling namespace of the same store keeps its own: an identity kept per table or
        per file, not per namespace, still names the forgotten one."""
        assert ledger_forget is not None
        if not takes_namespace(ledger_forget):
            not_exercised(
                "the forget hook takes no namespace (a callable with one argument, or a shell "
                f"command that reads ${FORGET_NAMESPACE_ENV})"
            )
        label, kept_label = ledgers.label("forgotten"), ledgers.label("kept")
        old = open_both(ledgers, label)
        kept = ledgers.open(kept_label)
        first, ids = spent_store(ledgers, old)
        kept_first, kept_ids = spent_store(ledgers, [kept], "kept")
        forget_now(ledgers, ledger_forget, ledgers.namespace(label))
        problems: list[str] = []
        for handle in old:
            who = f"the {handle.flavor} instance opened before its namespace forgot"
            problems += answers_for_forgotten(handle, first, ids, who)
        flavors = list(dict.fromkeys(h.flavor for h in old))
        problems += new_instance_problems(ledgers, label, flavors, first, ids)
        sibling = "an instance of the sibling namespace"
        problems += answers_for_forgotten(kept, kept_first, kept_ids, sibling)
        if not _still_spent(ledgers, kept_label, kept_ids):
            partly(
                request,
                "the forget hook forgot more than the namespace it was told (the sibling "
                "namespace lost its records too): a whole-store forget, not one namespace",
            )
        verdict(problems)
