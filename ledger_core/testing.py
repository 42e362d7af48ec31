"""The memory backend's test and operations hooks (its ``testing`` reference): loaded only
by ``ledger_core.registry.testing_hook``, never by a ledger."""

from __future__ import annotations

from .memory import namespace_of, store_for
from .scratch import require_scratch_prefix
from .urls import LedgerURL


class _Hooks:
    def remove_scratch(self, url: LedgerURL, prefix: str) -> int:
        """Drop every record of the namespaces named ``prefix...`` (a check's scratch; any
        other prefix is refused before anything is touched)."""
        checked = require_scratch_prefix(prefix)
        store = store_for(url)
        with store._lock:
            doomed = {key for key in store._keys if namespace_of(key).startswith(checked)}
            store._keys -= doomed
            for key in doomed:
                store._holders.pop(key, None)
            return len({namespace_of(key) for key in doomed})


HOOKS = _Hooks()
