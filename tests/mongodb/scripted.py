"""A MongoDB ledger's driver calls, scripted or intercepted, sync and async alike.

``ScriptedLedger`` opens a real ``MongoLedger`` / ``AsyncMongoLedger`` over a client that
answers each command from a script (no server), so every reply or driver exception a
decision can meet is pinned. ``LoseReplies`` wraps a real ledger's database and loses
the replies of chosen commands (or never sends them), as a reset connection would.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections import deque
from collections.abc import Iterator, Mapping
from typing import Any

from bson.binary import UUID_SUBTYPE, Binary
from pymongo.errors import AutoReconnect

from ledger_mongodb.aio import AsyncMongoLedger
from ledger_mongodb.ledger import MongoLedger
from tests.flavors import Flavored

UUID = Binary(bytes(range(16)), UUID_SUBTYPE)
GENESIS = b"g" * 16
GENESIS_KEY = "genesis\x00n"
Answer = Mapping[str, Any] | BaseException


def batch(*docs: Mapping[str, Any]) -> dict[str, Any]:
    """A single-batch cursor reply."""
    return {"ok": 1, "cursor": {"firstBatch": list(docs)}}


def opening(uuid: Any = UUID) -> list[Answer]:
    """What a server answers a ledger's open of namespace ``n`` in collection ``c``: a
    MongoDB 7 primary, the collection (with ``uuid``), no index, the genesis (BinData keys)."""
    engine = {"storageEngine": {"name": "wiredTiger", "persistent": True}}
    info = {} if uuid is None else {"uuid": uuid}
    entry = {"name": "c", "type": "collection", "options": {}, "info": info}
    return [
        {"ok": 1, "isWritablePrimary": True},
        {"ok": 1, "version": "7.0.2"},
        {"ok": 1, **engine},
        batch(entry),
        batch(),
        batch({"_id": GENESIS_KEY, "g": GENESIS, "enc": "bin"}),
    ]


class Script:
    """A client whose databases answer each command with the next scripted answer (an
    exception is raised); ``seen`` names each command sent (its first key)."""

    def __init__(self, aio: bool) -> None:
        self.aio = aio
        self.answers: deque[Answer] = deque()
        self.seen: list[str] = []
        self.sent: list[Mapping[str, Any]] = []

    def push(self, *answers: Answer) -> None:
        self.answers.extend(answers)

    def get_database(self, name: str) -> _Database:
        return _Database(self, name)

    def _duplicate(self) -> Script:
        return self

    def close(self) -> None:
        """A host's client: never called by the ledger."""
        raise AssertionError("the ledger closed a host's client")

    def answer(self, command: Mapping[str, Any]) -> Any:
        self.seen.append(next(iter(command)))
        self.sent.append(command)
        answer = self.answers.popleft()
        if isinstance(answer, BaseException):
            raise answer
        return answer


class _Database:
    def __init__(self, script: Script, name: str) -> None:
        self.script, self.name = script, name

    def command(self, command: Mapping[str, Any], **_: Any) -> Any:
        if not self.script.aio:
            return self.script.answer(command)

        async def reply() -> Any:
            return self.script.answer(command)

        return reply()


class ScriptedLedger(Flavored):
    """A ledger (``flavor``: sync or async) opened over a :class:`Script` on namespace
    ``n`` of collection ``c``, its migration check passed; ``client.seen`` starts empty."""

    def __init__(self, flavor: str, uuid: Any = UUID, recheck: float = 3600) -> None:
        self.flavor = flavor
        self.loop = None if flavor == "sync" else asyncio.new_event_loop()
        self.client = Script(aio=self.loop is not None)
        self.client.push(*opening(uuid))
        cls: Any = MongoLedger if self.loop is None else AsyncMongoLedger
        options = {"namespace": "n", "collection": "c", "recheck": recheck}
        self.ledger = self.run(cls.from_client(self.client, database="d", **options))
        # The migration check before a ledger's first answer: no marker, the genesis.
        self.client.push(batch({"_id": GENESIS_KEY, "g": GENESIS}))
        self.run(self.ledger._clear())
        self.client.seen.clear()
        self.client.sent.clear()


class LoseReplies:
    """A ledger's database that sends each command for real, then loses the reply of the
    ``lose``-th commands, and never sends the ``drop``-th (counted from 1)."""

    def __init__(self, db: Any, lose: set[int], drop: set[int] | None = None) -> None:
        self.db, self.lose, self.drop, self.n = db, lose, drop or set(), 0
        self.name = db.name

    def command(self, *args: Any, **kwargs: Any) -> Any:
        self.n += 1
        n = self.n
        if n in self.drop:
            raise AutoReconnect("connection reset before the request")
        answer = self.db.command(*args, **kwargs)
        if inspect.isawaitable(answer):
            return self._later(n, answer)
        if n in self.lose:
            raise AutoReconnect("connection reset after the request")
        return answer

    async def _later(self, n: int, answer: Any) -> Any:
        reply = await answer
        if n in self.lose:
            raise AutoReconnect("connection reset after the request")
        return reply


@contextlib.contextmanager
def losing(ledger: Any, lose: set[int], drop: set[int] | None = None) -> Iterator[LoseReplies]:
    """``ledger``'s commands on its database go through :class:`LoseReplies` meanwhile."""
    real = ledger._db
    ledger._db = wrapper = LoseReplies(real, lose, drop)
    try:
        yield wrapper
    finally:
        ledger._db = real
