"""H1-H5: the core's host rules, driven against the ledger under test (sync and async)."""

from __future__ import annotations

import hashlib
from typing import Any, cast

from ledger_core import host, host_rules, host_rules_aio
from ledger_core.host import CloseVerdict, LandedVerdict, PendingRequest, ResolveVerdict
from ledger_core.ids import MarkerKind, closed_proven_marker, marker_id

from ..declare import MARKERS, declare
from ..harness import Handle, Ledgers
from .common import not_applicable, open_both

H1 = declare("H1", "host: only a result that is True lets the call run")
H2 = declare("H2", "host: is_spent tells a failed spend that never landed")
H3 = declare("H3", "host: a close proves only with a store_id; markers are never ids")
H4 = declare("H4", "host: a retried close keeps its verdict; late answers are told")
H5 = declare("H5", "host: a decision is spent only in the store it was minted under")


def _host(ledgers: Ledgers, handle: Handle, rule: str, argument: object, **options: object) -> Any:
    """``host_rules.<rule>`` on the handle's ledger, or ``host_rules_aio.<rule>_async`` for
    an async one."""
    if handle.is_async:
        call = getattr(host_rules_aio, f"{rule}_async")(handle.ledger, argument, **options)
        return ledgers.runtime.loop.run(call)
    return getattr(host_rules, rule)(handle.ledger, argument, **options)


def _resolve(ledgers: Ledgers, handle: Handle, pending: PendingRequest) -> host.Resolution:
    """A person's approval of ``pending`` (the rules spend a denial the same way)."""
    return cast(host.Resolution, _host(ledgers, handle, "resolve", pending, approved=True))


def _close(ledgers: Ledgers, handle: Handle, pending: PendingRequest) -> host.Closure:
    return cast(host.Closure, _host(ledgers, handle, "close_pause", pending))


def _why(result: Any) -> str:
    error = getattr(result, "error", None)
    return f" ({type(error).__name__}: {error})" if error is not None else ""


def _legacy_texts(request_id: str) -> dict[str, str]:
    """The texts markers once had in the request-id space, for ``request_id``."""
    digest = hashlib.sha256(request_id.encode("utf-8")).hexdigest()
    return {
        "closed-proven": f"closed-proven:{request_id}",
        "closed-proven-sha256": f"closed-proven-sha256:{digest}",
        # today's marker bytes read as Latin-1: a valid request id whose Latin-1 (or
        # cp1252) encoding IS the marker, for a store that encodes ids that way
        "marker-as-latin-1": closed_proven_marker(request_id).decode("latin-1"),
    }


def _lookalike_problems(ledgers: Ledgers, handle: Handle, first: bool) -> list[str]:
    """Requests named like another request's marker text, answered before and after its close."""
    problems: list[str] = []
    who = handle.flavor
    markers = handle.has(MARKERS)
    for order in ("lookalike answered first", "close first"):
        for form in ("closed-proven", "closed-proven-sha256", "marker-as-latin-1"):
            subject = ledgers.ids(1, f"{who}-subject")[0]
            name = _legacy_texts(subject)[form]
            where = f"{who}, {order}, a request named {name!r}"
            lookalike = host.mint(handle.ledger, name)
            pending = host.mint(handle.ledger, subject)
            if order == "lookalike answered first":
                answered = _resolve(ledgers, handle, lookalike)
                closure = _close(ledgers, handle, pending)
            else:
                closure = _close(ledgers, handle, pending)
                answered = _resolve(ledgers, handle, lookalike)
            if answered.verdict is not ResolveVerdict.RUN:
                problems.append(
                    f"{where}: its first answer gave {answered.verdict.value}{_why(answered)}, "
                    "not run (a request id is never a marker)"
                )
            if not closure.proven:
                problems.append(
                    f"{where}: closing {subject!r}, which nobody answered, gave "
                    f"{closure.verdict.value}: {closure.reason}{_why(closure)}"
                )
            elif not handle.reads_spent(subject):
                problems.append(
                    f"{where}: the close of {subject!r} claimed a proof ({closure.reason}) "
                    "without spending it: it still reads unspent"
                )
            late = _resolve(ledgers, handle, pending)
            expected = ResolveVerdict.CLOSED_BY_HOST if markers else ResolveVerdict.ALREADY_SPENT
            if late.verdict is not expected:
                problems.append(
                    f"{where}: a late answer to the closed {subject!r} gave "
                    f"{late.verdict.value}{_why(late)}, not {expected.value}"
                )
    if markers:
        # The lineage text of this very store (once per store: the variants share it).
        store_id = str(handle.store_id) if first else f"{handle.store_id}-{who}"
        name = f"migrated-from:{store_id}"
        if handle.call("is_marker_spent", marker_id(MarkerKind.LINEAGE, store_id)) is not False:
            problems.append(f"{who}: a lineage marker reads spent before anything recorded one")
        if handle.call("spend", name) is not True:
            problems.append(f"{who}: a fresh request named {name!r} could not be spent")
        elif handle.call("is_marker_spent", marker_id(MarkerKind.LINEAGE, store_id)) is not False:
            problems.append(f"{who}: spending the request {name!r} recorded a migration lineage")
        source = f"{store_id}-{who}-source"
        handle.call("spend_marker", marker_id(MarkerKind.LINEAGE, source))
        if handle.call("spend", f"migrated-from:{source}") is not True:
            problems.append(
                f"{who}: after a lineage from {source!r} was recorded, the request "
                f"'migrated-from:{source}' could not be spent"
            )
    return problems


class HostRules:
    @H1()
    def test_H1_only_true_runs(self, ledgers: Ledgers) -> None:
        for handle in open_both(ledgers, ledgers.label()):
            pending = host.mint(handle.ledger, ledgers.ids(1, handle.flavor)[0])
            first = _resolve(ledgers, handle, pending)
            assert first.verdict is ResolveVerdict.RUN, (
                f"{handle.flavor}: the first answer gave {first.verdict.value}{_why(first)}"
            )
            second = _resolve(ledgers, handle, pending)
            assert second.verdict is ResolveVerdict.ALREADY_SPENT, (
                f"{handle.flavor}: a second answer gave {second.verdict.value}{_why(second)}"
            )

    @H2()
    def test_H2_landed_after_failure(self, ledgers: Ledgers) -> None:
        for handle in open_both(ledgers, ledgers.label()):
            request_id = ledgers.ids(1, handle.flavor)[0]
            expected = (
                LandedVerdict.NOT_LANDED if handle.has_is_spent else LandedVerdict.COUNTS_AS_SPENT
            )
            before = _host(ledgers, handle, "spend_landed", request_id)
            assert before is expected, f"{handle.flavor}: an unspent id gave {before.value}"
            assert handle.spend(request_id) is True
            after = _host(ledgers, handle, "spend_landed", request_id)
            assert after is LandedVerdict.COUNTS_AS_SPENT, (
                f"{handle.flavor}: a spent id gave {after.value}"
            )

    @H3()
    def test_H3_close_with_proof(self, ledgers: Ledgers) -> None:
        for handle in open_both(ledgers, ledgers.label()):
            pending = host.mint(handle.ledger, ledgers.ids(1, handle.flavor)[0])
            closure = _close(ledgers, handle, pending)
            if handle.store_id is None:
                assert closure.verdict is CloseVerdict.POSSIBLY_RUN, (
                    "a ledger without store_id let the host claim a proof"
                )
                continue
            assert closure.proven, (
                f"{handle.flavor}: close gave {closure.verdict.value}: {closure.reason}"
                f"{_why(closure)}"
            )
            if handle.has(MARKERS):
                assert closure.recorded, (
                    f"{handle.flavor}: proven, but not recorded: {closure.reason}"
                )
                marker = closed_proven_marker(pending.request_id)
                assert handle.call("is_marker_spent", marker) is True, "the close was not recorded"
            answered = host.mint(handle.ledger, ledgers.ids(1, handle.flavor)[0])
            assert _resolve(ledgers, handle, answered).verdict is ResolveVerdict.RUN
            late = _close(ledgers, handle, answered)
            assert late.verdict is CloseVerdict.POSSIBLY_RUN, (
                f"{handle.flavor}: closing an answered request claimed a proof"
            )

    @H4(MARKERS)
    def test_H4_retried_close_keeps_verdict(self, ledgers: Ledgers) -> None:
        label = ledgers.label()
        for handle in open_both(ledgers, label):
            if handle.store_id is None:
                not_applicable("store_id is None: the host never closes with a proof")
            if not handle.has(MARKERS):
                not_applicable(f"the {handle.flavor} variant has no markers (the other one has)")
            pending = host.mint(handle.ledger, ledgers.ids(1, handle.flavor)[0])
            assert _close(ledgers, handle, pending).proven
            fresh = ledgers.open(label, handle.flavor)
            again = _close(ledgers, fresh, pending)
            assert again.proven, f"{handle.flavor}: a retried close lost its proof: {again.reason}"
            late = _resolve(ledgers, fresh, pending)
            assert late.verdict is ResolveVerdict.CLOSED_BY_HOST, (
                f"{handle.flavor}: a late answer gave {late.verdict.value}{_why(late)}"
            )

    @H5()
    def test_H5_spent_only_where_minted(self, ledgers: Ledgers) -> None:
        label = ledgers.label("minted")
        for handle in open_both(ledgers, label):
            if handle.store_id is None:
                not_applicable("store_id is None: the host cannot tell stores apart")
            other = ledgers.open(ledgers.label("elsewhere"), handle.flavor)
            pending = host.mint(handle.ledger, ledgers.ids(1, handle.flavor)[0])
            moved = _resolve(ledgers, other, pending)
            assert moved.verdict is ResolveVerdict.LEDGER_CHANGED, (
                f"{handle.flavor}: resolving under another store gave {moved.verdict.value}"
            )
            if other.has_is_spent:
                assert other.is_spent(pending.request_id) is False, (
                    "a ledger-changed answer still spent the id in the other store"
                )
            same = ledgers.open(label, handle.flavor)
            home = _resolve(ledgers, same, pending)
            assert home.verdict is ResolveVerdict.RUN, (
                f"{handle.flavor}: a new instance of the minting store gave {home.verdict.value}"
            )

    @H3()
    def test_H3_ids_that_look_like_markers(self, ledgers: Ledgers) -> None:
        """Markers live outside the request-id space: a request called `closed-proven:X`
        neither forges the close of X, nor is refused because X was closed."""
        problems: list[str] = []
        for n, handle in enumerate(open_both(ledgers, ledgers.label())):
            if handle.store_id is None:
                not_applicable("store_id is None: the host never closes with a proof")
            problems += _lookalike_problems(ledgers, handle, first=n == 0)
        assert not problems, "marker texts are not request ids: " + "\n  ".join(problems[:10])
