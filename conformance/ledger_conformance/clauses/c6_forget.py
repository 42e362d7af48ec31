"""C6 after forget: a store that forgot is a new store; no instance answers for it under
the old ``store_id``.

A store can forget after a ledger opened it (TRUNCATE, DROP and re-create, FLUSHALL, a
deleted table or file). A ledger that read its identity once keeps reporting the old
``store_id`` and spends an already-run request again: a host that minted the request
under that ``store_id`` runs it twice. These clauses call the ``ledger_forget`` hook
(which makes the whole store under test forget everything), so they run last, after the
final "every acknowledged id is still spent" check (C2).

For an old instance (opened before the forget) and a new one (opened after), any
``spend(old id)`` that returns ``True`` or ``is_spent(old id)`` that returns ``False``
while the instance reports the old ``store_id`` (read before and after the call) is a
violation. Raising a ``LedgerError`` is fine (fail closed). A new instance has another
``store_id`` (or ``None``) and works as a new store, or refuses with a ``LedgerError``
that says why.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from ledger_core.errors import LedgerError

from ..declare import FORGET
from ..harness import Handle, Ledgers, error_text
from .c6_identity import C6
from .common import expect_bool, not_applicable, open_both

OLD_IDS = 10
Forget = Callable[[], object] | None


def _store_id_now(handle: Handle) -> object:
    try:
        return handle.store_id
    except Exception as exc:  # a ledger may refuse to name an identity it lost
        return f"<raised {error_text(exc)}>"


def _forget(ledgers: Ledgers, forget: Callable[[], object]) -> None:
    ledgers.runtime.forgot = True
    try:
        forget()
    except Exception as exc:
        pytest.fail(f"the forget hook failed: {error_text(exc)}", pytrace=False)


def _setup(ledgers: Ledgers, forget: Forget) -> tuple[str, list[Handle], str, list[str]]:
    """Open every variant on a new store, spend ids, then make the store forget."""
    assert forget is not None  # the FORGET need skipped the test otherwise
    label = ledgers.label()
    old = open_both(ledgers, label)
    if old[0].store_id is None:
        not_applicable("store_id is None: the ledger never proves, so no old identity can lie")
    first = old[0].store_id
    assert isinstance(first, str), f"store_id must be a str or None, not {first!r}"
    for handle in old[1:]:
        assert handle.store_id == first, "the variants report different store_ids"
    ids = ledgers.ids(OLD_IDS, "old")
    for request_id in ids:
        assert expect_bool(old[0].call("spend", request_id), "spend") is True
    for handle in old:
        if handle.has_is_spent:
            assert handle.call("is_spent", ids[0]) is True, "a spent id reads unspent"
    _forget(ledgers, forget)
    return label, old, first, ids


def _answers_for_forgotten(handle: Handle, first: str, ids: list[str], who: str) -> list[str]:
    """What ``handle`` answered for the forgotten ids under the old ``store_id``."""
    problems: list[str] = []
    calls = (["is_spent"] if handle.has_is_spent else []) + ["spend"]
    for request_id in ids:
        for method in calls:
            before = _store_id_now(handle)
            try:
                value = handle.call(method, request_id)
            except LedgerError:
                continue  # fail closed: the ledger noticed
            except Exception as exc:
                problems.append(f"{who}: {method} raised a non-LedgerError: {error_text(exc)}")
                continue
            after = _store_id_now(handle)
            if first not in (before, after):
                continue  # it answers as another store: a host sees ledger-changed (H5)
            if not isinstance(value, bool):
                problems.append(f"{who}: {method}({request_id!r}) returned {value!r}, not a bool")
            elif method == "spend" and value is True:
                problems.append(
                    f"{who}: spend({request_id!r}) returned True under the old store_id "
                    f"{first!r}: the id was spent before the store forgot"
                )
            elif method == "is_spent" and value is False:
                problems.append(
                    f"{who}: is_spent({request_id!r}) returned False under the old store_id "
                    f"{first!r}: the id was spent before the store forgot"
                )
    return problems


def _verdict(problems: list[str]) -> None:
    assert not problems, (
        "the store forgot, and the ledger kept answering under its old identity: "
        + "\n  ".join(problems[:10])
    )


class C6Forget:
    @C6(FORGET)
    @pytest.mark.ledger_forgets
    def test_C6_forgotten_store_old_instance(self, ledgers: Ledgers, ledger_forget: Forget) -> None:
        """Instances opened before the forget fail closed (or answer as another store)."""
        _, old, first, ids = _setup(ledgers, ledger_forget)
        problems: list[str] = []
        for handle in old:
            who = f"the {handle.flavor} instance opened before the forget"
            problems += _answers_for_forgotten(handle, first, ids, who)
        _verdict(problems)

    @C6(FORGET)
    @pytest.mark.ledger_forgets
    def test_C6_forgotten_store_new_instance(self, ledgers: Ledgers, ledger_forget: Forget) -> None:
        """A new instance is a new store (another store_id, working), or refuses clearly."""
        label, old, first, ids = _setup(ledgers, ledger_forget)
        problems: list[str] = []
        for flavor in dict.fromkeys(h.flavor for h in old):
            who = f"a {flavor} instance opened after the forget"
            try:
                fresh = ledgers.open(label, flavor)
            except LedgerError as exc:
                if not str(exc).strip():
                    problems.append(f"{who}: the open raised {type(exc).__name__} with no reason")
                continue  # refusing to open a store that forgot is fail-closed
            now = _store_id_now(fresh)
            if now == first:
                problems.append(
                    f"{who} reports the old store_id {first!r}: a store that forgot is a new "
                    "store and needs a new identity"
                )
            problems += _answers_for_forgotten(fresh, first, ids, who)
            new_id = ledgers.ids(1, f"new-{flavor}")[0]
            try:
                spent = fresh.call("spend", new_id)
            except LedgerError as exc:
                if not str(exc).strip():
                    problems.append(f"{who}: a spend raised {type(exc).__name__} with no reason")
                continue  # refuses the forgotten store with a reason: fail closed
            if spent is not True:
                problems.append(f"{who}: spending a fresh id returned {spent!r}, not True")
        _verdict(problems)
