"""The decision-ledger conformance suite (C1-C10, H1-H5) for any ledger.

Run it with ``pytest --pyargs ledger_conformance --ledger-url URL`` (or
``--ledger-factory module:callable``), with ``decision-ledger check``, or subclass
:class:`LedgerConformance` in a project's own tests.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .context import LedgerContext, create_option, enter_factory, offers_create

if TYPE_CHECKING:
    from .suite import LedgerConformance

__all__ = ["LedgerConformance", "LedgerContext", "create_option", "enter_factory", "offers_create"]


def __getattr__(name: str) -> object:
    # Imported lazily: the suite pulls in pytest and hypothesis, the contract does not.
    if name == "LedgerConformance":
        from .suite import LedgerConformance

        return LedgerConformance
    raise AttributeError(name)
