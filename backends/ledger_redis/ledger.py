"""The sync Redis ledger: a thin shell that drives :mod:`.decisions` through the
transport's steps with redis-py's sync objects (:class:`~.transport.SyncOps`)."""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator, Sequence
from typing import Any

from ledger_core.base import ReentrantLedgerBase
from ledger_core.doctor import Check
from ledger_core.errors import LedgerError
from ledger_core.ids import DEFAULT_NAMESPACE, MarkerKind, validate_namespace, validate_request_id
from ledger_core.steps import run_steps
from ledger_core.tokens import new_token

from . import decisions, identity
from .driver import redis_module
from .errors import unexpected
from .options import RedisOptions
from .transport import Op, SyncOps, Transport, deadline_for, through, transport_for


def opening(
    transport: Transport, namespace: str, options: RedisOptions
) -> Generator[Op, Any, decisions.Opened]:
    """Read the servers' facts and the namespace's identity (C6); nothing raw (C4)."""
    steps = decisions.open_steps(
        namespace, options, cluster=transport.cluster, location=transport.location
    )
    try:
        return (yield from through(transport, steps, deadline_for(transport)))
    except LedgerError:
        raise
    except Exception as exc:
        raise unexpected(exc, "open", spend=False) from exc


class Shell:
    """What the sync and async ledgers hold: the transport, the plan, the info and the
    guard (re-check, failed for good); each operation is one generator of primitive
    operations (:meth:`_ops_for`) that the flavour's driver performs."""

    def __init__(
        self,
        transport: Transport,
        opened: decisions.Opened,
        ops: Any,
        on_close: Callable[[], Any] | None,
    ) -> None:
        self._io = transport
        self._perform = ops
        self._guard = decisions.Guard(opened)
        self._plan = opened.plan
        self._info = opened.info
        self._on_close = on_close

    def _ops_for(
        self, steps: decisions.Steps, what: str, *, spend: bool, recheck: bool = True
    ) -> Generator[Op, Any, Any]:
        guarded = self._guard.steps(steps, what, spend=spend, recheck=recheck)
        return through(self._io, guarded, deadline_for(self._io))

    def _spend_ops(self, request_id: bytes, digest: bytes | None = None) -> Any:
        return self._ops_for(
            decisions.spend_steps(self._plan, request_id, new_token(), digest), "spend", spend=True
        )

    def _read_ops(self, request_id: bytes) -> Any:
        return self._ops_for(decisions.read_steps(self._plan, request_id), "is_spent", spend=False)

    def _batches(self, request_ids: Sequence[str]) -> Iterator[Any]:
        """The ops of each pipelined trip of ``spend_many`` (per id on a Cluster, whose
        client sends one command per trip)."""
        raws = [validate_request_id(r) for r in request_ids]
        if self._io.cluster:
            return (self._spend_ops(raw) for raw in raws)
        return (
            self._ops_for(steps, "spend_many", spend=True)
            for steps in decisions.spend_many_batches(self._plan, raws)
        )

    def _page_ops(self, scan: decisions.Scan) -> Any:
        # A page is one trip; the configuration re-check stays with spends and reads.
        return self._ops_for(scan.page_steps(), scan.what, spend=False, recheck=False)

    def _listing(self, count: int, kind: str | None = None) -> decisions.Listing:
        return decisions.Listing(self._plan, count, kind)

    def _namespace_scan(self, count: int) -> decisions.NamespaceScan:
        return decisions.NamespaceScan(self._plan.keys, count)


class RedisLedger(Shell, ReentrantLedgerBase):
    """A sync ledger in Redis: one genesis-proving script per spend or read, never an
    expiry.

    Open one with ``open_ledger("redis://...")`` or :meth:`from_client`. Spends and
    reads are one round trip each (plus one ``WAIT`` in the same trip when asked), and
    one configuration re-check trip at most every ``recheck_interval`` seconds.
    """

    @classmethod
    def from_client(
        cls, client: Any, *, namespace: str = DEFAULT_NAMESPACE, **options: Any
    ) -> RedisLedger:
        """A ledger on a redis-py ``Redis``, ``ConnectionPool`` or ``RedisCluster`` the
        host already has; the ledger never closes it."""
        opts = RedisOptions.for_client(options)
        transport = transport_for(client, asyncio_client=False)
        return cls.open_on(transport, namespace=validate_namespace(namespace), options=opts)

    @classmethod
    def open_on(
        cls,
        transport: Transport,
        *,
        namespace: str,
        options: RedisOptions,
        on_close: Callable[[], None] | None = None,
    ) -> RedisLedger:
        ops = SyncOps(transport)
        try:
            opened = run_steps(opening(transport, namespace, options), ops)
        except BaseException:
            if on_close is not None:
                on_close()
            raise
        return cls(transport, opened, ops, on_close)

    def _spend(self, request_id: bytes) -> bool:
        won: bool = run_steps(self._spend_ops(request_id), self._perform)
        return won

    def _spend_as(self, request_id: bytes, digest: bytes) -> bool:
        """C10: the same script as a spend, the attempt's digest stored with the token."""
        won: bool = run_steps(self._spend_ops(request_id, digest), self._perform)
        return won

    def _is_spent(self, request_id: bytes) -> bool:
        spent: bool = run_steps(self._read_ops(request_id), self._perform)
        return spent

    def spend_many(self, request_ids: Sequence[str]) -> list[bool]:
        """Spend a batch, pipelined (1000 scripts per trip; one command per trip on a
        Cluster): each answer is what :meth:`spend` would say."""
        out: list[bool] = []
        for ops in self._batches(request_ids):
            answer = run_steps(ops, self._perform)
            out += answer if isinstance(answer, list) else [answer]
        return out

    def spent_ids(self, count: int = 1000) -> Iterator[str]:
        """Every id spent in this namespace, streamed by ``SCAN`` pages of ``count``
        (every master of a Cluster); markers and other namespaces are never listed."""
        return self._scan(self._listing(count))

    def lineage(self) -> list[str]:
        """The store_ids this store was migrated from (its lineage markers)."""
        return sorted(self._scan(self._listing(1000, MarkerKind.LINEAGE)))

    def namespaces(self, count: int = 1000) -> Iterator[str]:
        """Every namespace with a genesis in this key space (database, or Cluster: every
        master), this one included, each once, streamed by ``SCAN`` pages of ``count``."""
        return self._scan(self._namespace_scan(count))

    def _scan(self, scan: decisions.Scan) -> Iterator[str]:
        while (items := run_steps(self._page_ops(scan), self._perform)) is not None:
            yield from items

    def doctor_checks(self) -> list[Check]:
        """``decision-ledger doctor``'s versions and configuration lines, from the facts
        read at open (no I/O)."""
        opened = self._guard.opened
        driver = str(getattr(redis_module(), "__version__", "?"))
        return identity.doctor_checks(
            opened.facts,
            opened.options,
            self._info,
            driver,
            opened.replication,
            sentinel=self._io.location.startswith("redis+sentinel:"),
        )

    def close(self) -> None:
        if not self._io.closed:
            self._io.close()
            if self._on_close is not None:
                self._on_close()
