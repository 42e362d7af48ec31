"""The sync DynamoDB ledger: performs :mod:`.decisions`' requests on a boto3 client (one
per process), each attempt bounded by its due time (:mod:`.deadlines`)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from ledger_core.base import ReentrantLedgerBase
from ledger_core.doctor import Check
from ledger_core.errors import LedgerClosed
from ledger_core.forks import PerProcess
from ledger_core.steps import Steps, run_steps
from ledger_core.tokens import new_token

from . import decisions, identity
from .clients import ClientFactory, client_target, host_sync_factory
from .commands import SCAN_SEGMENTS, Call, Request
from .deadlines import bounded
from .decisions import Handle, Session
from .options import Settings, Target

R = TypeVar("R")


class DynamoDBLedger(ReentrantLedgerBase):
    """A sync ledger in a DynamoDB table: one conditional ``PutItem`` per spend, then a
    consistent read of the namespace's genesis (C6). Open with ``open_ledger`` or
    :meth:`from_client`."""

    def __init__(self, session: Session, handle: Handle):
        self._session = session
        self._handle = handle
        self._process = PerProcess(None, lambda: handle.adopt(handle.make_client()))

    @classmethod
    def open(
        cls, target: Target, make_client: ClientFactory, *, owned: bool = True
    ) -> DynamoDBLedger:
        session = Session(target.table, target.settings, target.location, target.endpoint_url)
        client = make_client()
        ledger = cls(session, Handle(make_client, client, owned))
        try:
            ledger._info = ledger._run(decisions.open_steps(session))
        except BaseException:
            ledger.close()
            raise
        return ledger

    @classmethod
    def from_client(cls, client: Any, table: str, **options: Any) -> DynamoDBLedger:
        """A ledger on a boto3 DynamoDB client the host already has (never closed by us),
        with the URL's options (``namespace``, ``create``, ``durability``...)."""
        target = client_target(client, table, options)
        return cls.open(target, host_sync_factory(client), owned=False)

    def __enter__(self) -> DynamoDBLedger:
        return self

    def _current(self) -> Any:
        handle = self._handle
        if handle.closed:
            raise LedgerClosed("this DynamoDB ledger is closed")
        self._process.get()  # a forked child: never share the parent's sockets
        return handle.client

    def _perform(self, request: Request) -> Any:
        if isinstance(request, Call):
            client = self._current()
            with bounded(request.due, request.share):
                return getattr(client, request.op)(**request.params)
        time.sleep(request.seconds)
        return None

    def _run(self, steps: Steps[Request, R]) -> R:
        self._current()  # a forked child's client is built before the call's deadline starts
        return run_steps(steps, self._perform)

    def _spend_as(self, request_id: bytes, digest: bytes | None = None) -> bool:
        return self._run(decisions.spend_steps(self._session, request_id, new_token(), digest))

    _spend = _spend_as  # no digest: a plain spend

    def _is_spent(self, request_id: bytes) -> bool:
        return self._run(decisions.is_spent_steps(self._session, request_id))

    def reidentify(self) -> None:
        """A fresh genesis for this namespace, e.g. after a restore (``Reidentifiable``)."""
        self._run(decisions.reidentify_steps(self._session))

    def spent_ids(self) -> Iterator[str]:
        """Every id spent in this namespace, streamed from parallel consistent Scans."""
        return self._scan(decisions.ParallelScan.ids(self._session))

    def namespaces(self) -> Iterator[str]:
        """Every namespace of this table, each once, streamed."""
        return self._scan(decisions.ParallelScan.namespaces(self._session))

    def _scan(self, scan: decisions.ParallelScan) -> Iterator[str]:
        with ThreadPoolExecutor(SCAN_SEGMENTS) as pool:
            while pages := scan.next_pages():
                yield from scan.listed(list(pool.map(self._run, pages)))

    def doctor_checks(self) -> list[Check]:
        """From the facts read at open or at the last re-check (no I/O)."""
        import botocore

        s = self._session
        assert s.facts is not None  # read at open
        assert s.info is not None
        return identity.doctor_checks(
            s.facts, s.info, s.settings, s.endpoint_url, botocore.__version__
        )

    def close(self) -> None:
        if self._handle.closes(self._process.inherited()):
            self._handle.client.close()


__all__ = ["DynamoDBLedger", "Settings"]
