"""What ``decision-ledger check URL`` leaves in the user's store, said and removed where it can be.

A ledger never deletes records (C2), so removal is the backend's administrative
``remove_scratch(url, prefix)`` hook, refused for any prefix not a check's own.
"""

from __future__ import annotations

from ledger_core.errors import LedgerError
from ledger_core.protocol import close_ledger
from ledger_core.registry import open_ledger, testing_hook
from ledger_core.scratch import is_scratch_prefix
from ledger_core.urls import LedgerURL

from .harness import error_text
from .urlmode import namespace_for

SHOWN = 5  # namespace names printed before "and N more"
PREFLIGHT = "preflight"  # the label the check opens first: its namespace always exists


def _listed(url: str, scratch: str, prefix: str) -> tuple[list[str] | None, str]:
    """The scratch namespaces the store lists, or ``None`` and why it cannot."""
    try:
        ledger = open_ledger(url, namespace=namespace_for(scratch, PREFLIGHT), create=False)
    except LedgerError as exc:
        return None, f"could not open the store to list them ({error_text(exc)})"
    try:
        lister = getattr(ledger, "namespaces", None)
        if not callable(lister):
            return None, "the ledger has no namespaces() listing, so they were not counted"
        try:
            return sorted(n for n in lister() if isinstance(n, str) and n.startswith(prefix)), ""
        except Exception as exc:  # a third party's listing: said, never a crash after the table
            return None, f"listing them failed ({error_text(exc)})"
    finally:
        close_ledger(ledger)


def scratch_lines(url: str, scratch: str, *, keep: bool = False) -> list[str]:
    """The lines a check prints about its scratch namespaces (after removing them, where
    the backend can and ``keep`` is false)."""
    prefix = f"{scratch}-"
    parsed = LedgerURL.parse(url)
    try:  # a hook that fails to load or to remove is said with the reason; the table stands
        remover = testing_hook(parsed.scheme, "remove_scratch")
        wanted = not keep and is_scratch_prefix(prefix)
        removed = remover(parsed, prefix) if remover is not None and wanted else None
    except Exception as exc:
        return [
            f"scratch: removing the namespaces named {prefix}* failed ({error_text(exc)}); "
            "drop them with the store's own tools"
        ]
    if removed is not None:
        return [
            f"scratch: removed the {removed} namespace(s) named {prefix}* this run wrote; "
            "nothing else in the store was touched"
        ]
    found, why = _listed(url, scratch, prefix)
    if found == []:
        return [f"scratch: the store holds no namespace named {prefix}*"]
    if found is None:
        what = f"namespaces named {prefix}* ({why})"
    else:
        shown = ", ".join(found[:SHOWN]) + (
            f", and {len(found) - SHOWN} more" if len(found) > SHOWN else ""
        )
        what = f"{len(found)} namespace(s) named {prefix}*: {shown}"
    lines = [f"scratch: this run left {what}; nothing else in the store was touched"]
    if keep:
        lines.append("scratch: kept, as asked (--keep-scratch)")
    elif remover is None:
        lines.append(
            f"scratch: the {parsed.scheme} backend has no remove_scratch hook, and a ledger "
            "never deletes its own records (C2), so drop them with the store's own tools: "
            f"every record whose namespace starts with {prefix}"
        )
    return lines


__all__ = ["is_scratch_prefix", "scratch_lines"]
