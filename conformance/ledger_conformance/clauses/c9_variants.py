"""C9 same semantics: the sync and async variants of a backend agree on one store."""

from __future__ import annotations

import pytest

from ledger_core.errors import InvalidRequestId
from ledger_core.ids import MAX_ID_BYTES

from ..declare import declare
from ..harness import Ledgers
from .common import assert_linearizable, expect_bool, open_flavor

C9 = declare("C9", "the sync and async variants agree on one store")


class C9Variants:
    @C9()
    def test_C9_sync_and_async_agree(self, ledgers: Ledgers) -> None:
        label = ledgers.label()
        sync = open_flavor(ledgers, label, "sync")
        asyn = open_flavor(ledgers, label, "async")
        assert sync.store_id == asyn.store_id, (
            f"sync store_id {sync.store_id!r} != async store_id {asyn.store_id!r}"
        )
        for writer, reader in ((sync, asyn), (asyn, sync)):
            for request_id in ledgers.ids(5, writer.flavor):
                if reader.has_is_spent:
                    assert expect_bool(reader.is_spent(request_id), "is_spent") is False
                assert expect_bool(writer.spend(request_id), f"{writer.flavor} spend") is True
                if reader.has_is_spent:
                    assert reader.is_spent(request_id) is True, (
                        f"the {reader.flavor} variant does not see a {writer.flavor} spend"
                    )
                assert expect_bool(reader.spend(request_id), f"{reader.flavor} spend") is False, (
                    f"the {reader.flavor} variant spent {request_id!r} again"
                )
        for handle in (sync, asyn):
            for bad in ("", "v" * (MAX_ID_BYTES + 1), b"bytes"):
                with pytest.raises(InvalidRequestId):
                    handle.call("spend", bad)
        assert sync.has_is_spent == asyn.has_is_spent, "only one variant has is_spent"
        assert_linearizable(ledgers, "C9")
