"""``--ledger-url``: the suite builds ledgers itself, one namespace per store label.

The suite knows no scheme: the backend's ``reroute(url, route)`` hook sends the URL's
address through ``ctx.route`` (a backend without one is never routed: the fault clauses
say "not exercised"), and its ``local_faults(url)`` hook serves C4's local faults.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import ledger_core
from ledger_core.errors import InvalidLedgerURL, UnknownScheme
from ledger_core.ids import MAX_NAMESPACE_BYTES
from ledger_core.opening import LocalFaults, Route
from ledger_core.registry import testing_hook
from ledger_core.urls import LedgerURL

from .context import LedgerContext, create_option

# Every namespace a URL run writes starts with ledger_core.scratch.SCRATCH_PREFIX (then
# the run id): one clearly named scratch area in the user's store, which the report names.


def _reroute(url: str, route: Route) -> str | None:
    try:
        parsed = LedgerURL.parse(url)
        hook = testing_hook(parsed.scheme, "reroute")
    except (InvalidLedgerURL, UnknownScheme):  # opening it says why; a broken hook is raised
        return None
    return None if hook is None else hook(parsed, route)


def routable(url: str) -> bool:
    """Whether the URL names one address that a proxy can stand in front of."""
    return _reroute(url, lambda host, port: (host, port)) is not None


def rewrite(url: str, ctx: LedgerContext) -> str:
    """``url`` with its address replaced by ``ctx.route(host, port)`` when routable."""
    routed = _reroute(url, ctx.route)
    return url if routed is None else routed


def local_faults(url: str) -> LocalFaults | None:
    """The faults the backend can put the URL's store through here and now (its optional
    ``local_faults`` hook), or None. A hook that raises is not hidden: the clause fails."""
    try:
        parsed = LedgerURL.parse(url)
        hook = testing_hook(parsed.scheme, "local_faults")
    except (InvalidLedgerURL, UnknownScheme):
        return None
    return None if hook is None else hook(parsed)


def namespace_for(run_id: str, label: str) -> str:
    """One namespace per (run, label): unique per run, and always a valid namespace."""
    namespace = f"{run_id}-{label}"
    if len(namespace.encode("utf-8")) <= MAX_NAMESPACE_BYTES:
        return namespace
    digest = hashlib.sha256(label.encode("utf-8", "surrogatepass")).hexdigest()
    return f"{run_id}-h-{digest}"


@dataclass(frozen=True)
class URLFactory:
    """A factory (in the contract's sense) over a ledger URL."""

    url: str
    run_id: str
    offers_create = True  # ctx.create is passed on as the standard create option

    def __call__(self, ctx: LedgerContext) -> Any:
        url = rewrite(self.url, ctx)
        options: dict[str, Any] = {"namespace": self.namespace_of(ctx.store)}
        options.update(create_option(ctx))
        if ctx.flavor == "async":
            return ledger_core.open_async_ledger(url, **options)
        return ledger_core.open_ledger(url, **options)

    def __repr__(self) -> str:
        return f"URLFactory({ledger_core.redact_url(self.url)!r})"

    def namespace_of(self, label: str) -> str:
        """The namespace the store ``label`` lives in (a hook forgets it by this name)."""
        return namespace_for(self.run_id, label)

    @property
    def routable(self) -> bool:
        return routable(self.url)

    @property
    def ledger_local_faults(self) -> LocalFaults | None:
        """The factory contract's local faults, from the backend (probed at each use)."""
        return local_faults(self.url)
