"""Helpers for CLI tests: a progress meter that presses Ctrl-C, a ledger with nothing extra."""

from __future__ import annotations

import pytest

from ledger_core import cli
from ledger_core.migrate import Progress
from ledger_core.opening import OpenRequest


def press_ctrl_c_after(monkeypatch: pytest.MonkeyPatch, batches: int) -> None:
    """The CLI's meter shows each batch, then raises KeyboardInterrupt at ``batches``."""
    seen = 0
    real = cli._Meter.__call__

    def meter(self: cli._Meter, p: Progress) -> None:
        nonlocal seen
        seen += 1
        real(self, p)
        if seen == batches:
            raise KeyboardInterrupt

    monkeypatch.setattr(cli._Meter, "__call__", meter)


class Plain:
    """Only ``spend``: no markers, no listing, no ``store_id``."""

    store_id = None

    def spend(self, request_id: str) -> bool:
        return True


class PlainBackend:
    def open(self, request: OpenRequest) -> Plain:
        return Plain()

    async def open_async(self, request: OpenRequest) -> Plain:
        return Plain()
