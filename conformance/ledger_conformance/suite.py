"""The base class a backend's own tests subclass to run the whole suite in one file.

::

    class TestMyLedger(LedgerConformance):
        @pytest.fixture
        def ledger_factory(self):
            return my_factory          # LedgerContext -> ledger (see context.py)

``ledger_restart``, ``ledger_forget``, ``ledger_failover``, ``ledger_restore`` and
``ledger_after_restore`` may be overridden too; by
default each comes from its option, else from the factory's attribute of that name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from .clauses.batches import Batches
from .clauses.c1_callers import C1Callers
from .clauses.c1_fork import C1Fork
from .clauses.c1_once import C1Once
from .clauses.c2_permanent import C2Permanent
from .clauses.c2_volume import C2Volume
from .clauses.c3_interpreters import C3Interpreters
from .clauses.c3_processes import C3Processes
from .clauses.c3_reads import C3Reads
from .clauses.c4_bounded import C4Bounded
from .clauses.c6_failover import C6Failover
from .clauses.c6_forget import C6Forget
from .clauses.c6_held import C6Held
from .clauses.c6_identity import C6Identity
from .clauses.c6_opening import C6Opening
from .clauses.c6_restore import C6Restore
from .clauses.c7_isolation import C7Isolation
from .clauses.c7_siblings import C7Siblings
from .clauses.c8_families import C8Families
from .clauses.c8_ids import C8Ids
from .clauses.c9_variants import C9Variants
from .clauses.c10_reentry import C10Reentry, C10SharedPrefix
from .clauses.c45_faults import C4LocalFaults, C45Faults
from .clauses.h3_two_stores import H3TwoStores
from .clauses.host_rules import HostRules
from .clauses.interrupted import Interruptions, NewStoreAtOnce
from .clauses.l1_drawn import L1Drawn
from .clauses.l1_listing import L1Listing
from .clauses.m1_model import M1Model
from .hooks import factory_hook


def _hook_fixture(name: str) -> Any:
    """The fixture ``ledger_<name>``: the hook its option names, else the factory's."""

    @pytest.fixture(name=f"ledger_{name}")
    def hook(
        self: object, request: pytest.FixtureRequest, ledger_factory: Any
    ) -> Callable[[], object] | None:
        option: Callable[[], object] | None = request.getfixturevalue(f"ledger_option_{name}")
        return option or factory_hook(ledger_factory, f"ledger_{name}")

    return hook


# pytest collects the bases last-to-first: this order runs C1 first and H5 last.
class LedgerConformance(
    C6Restore,
    M1Model,
    Interruptions,
    NewStoreAtOnce,
    C6Failover,
    C6Held,
    C6Forget,
    C10SharedPrefix,
    C10Reentry,
    L1Drawn,
    L1Listing,
    H3TwoStores,
    HostRules,
    C9Variants,
    C8Families,
    C8Ids,
    C7Siblings,
    C7Isolation,
    C6Opening,
    C6Identity,
    C4LocalFaults,
    C4Bounded,
    C45Faults,
    C3Interpreters,
    C3Processes,
    C3Reads,
    C2Volume,
    C2Permanent,
    Batches,
    C1Callers,
    C1Fork,
    C1Once,
):
    """Every clause, C1-C10, H1-H5 and L1 (C10 and L1 when the ledger has spend_as and
    spent_ids: optional capabilities are detected, never assumed). Override
    ``ledger_factory``; the default reads ``--ledger-url`` / ``--ledger-factory``."""

    @pytest.fixture
    def ledger_factory(self, ledger_option_factory: Any) -> Any:
        return ledger_option_factory

    ledger_restart = _hook_fixture("restart")
    ledger_forget = _hook_fixture("forget")
    ledger_failover = _hook_fixture("failover")
    ledger_restore = _hook_fixture("restore")
    ledger_after_restore = _hook_fixture("after_restore")
