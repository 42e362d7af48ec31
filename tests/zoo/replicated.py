"""A primary and an asynchronous replica, modelled on one redis-server, for C6 after
failover (and the torture campaign's failovers).

Each store keeps two copies of its records (``a`` and ``b``) and a pointer to the
primary. A spend writes the primary's copy and queues the id; the replica gets a queued
write only once LAG newer ones follow it (replication lag). ``failover`` promotes the
replica: the queued writes are lost (the old primary re-syncs from the new one). Every
step is one Lua script, so processes and threads see one store.

``loses_spends_on_failover`` keeps its store_id through a lossy failover (the defect);
``renames_on_lossy_failover`` writes a new genesis when the failover lost writes, so the
old instances fail closed and new ones report another store_id; ``synchronous`` has no
lag (every failover is lossless and keeps the store_id).
"""

from __future__ import annotations

import threading
import uuid
from typing import Any

import redis

from ledger_conformance import LedgerContext
from ledger_core.errors import LedgerUnavailable, UnsafeStoreConfig

from .base import FORGOT, GUARD, ZooLedger, build, redis_address

LAG = 8  # writes the replica is behind
# KEYS[1] genesis, KEYS[2] the store's prefix; the primary's copy is KEYS[2]..p..':'..id
_PRIMARY = """local p = redis.call('GET', KEYS[2] .. 'primary') or 'a'
local r = 'b'
if p == 'b' then r = 'a' end
"""
SPEND = (
    GUARD
    + _PRIMARY
    + """if not redis.call('SET', KEYS[2] .. p .. ':' .. ARGV[2], ARGV[3], 'NX') then return 0 end
redis.call('RPUSH', KEYS[2] .. 'behind', ARGV[2])
while redis.call('LLEN', KEYS[2] .. 'behind') > tonumber(ARGV[4]) do
  local id = redis.call('LPOP', KEYS[2] .. 'behind')
  redis.call('SET', KEYS[2] .. r .. ':' .. id, redis.call('GET', KEYS[2] .. p .. ':' .. id))
end
return 1"""
)
GET = GUARD + _PRIMARY + "return redis.call('GET', KEYS[2] .. p .. ':' .. ARGV[2])"
EXISTS = GUARD + _PRIMARY + "return redis.call('EXISTS', KEYS[2] .. p .. ':' .. ARGV[2])"
# ARGV[1] '1': a lossy failover writes ARGV[2] as the new genesis. Answers the writes lost.
FAILOVER = (
    _PRIMARY
    + """local lost = redis.call('LRANGE', KEYS[2] .. 'behind', 0, -1)
for _, id in ipairs(lost) do redis.call('DEL', KEYS[2] .. p .. ':' .. id) end
redis.call('DEL', KEYS[2] .. 'behind')
redis.call('SET', KEYS[2] .. 'primary', r)
if #lost > 0 and ARGV[1] == '1' then redis.call('SET', KEYS[1], ARGV[2]) end
return #lost"""
)

_opened: set[tuple[str, int, str]] = set()  # (host, port, label) this process opened
_lock = threading.Lock()


class Replicated(ZooLedger):
    """The zoo's ledger on a modelled primary + replica (spends and reads on the primary)."""

    lag = LAG

    def __init__(self, label: str, host: str, port: int) -> None:
        super().__init__(label, host, port)
        self.prefix = f"zoo-rep:{label.encode().hex()}:"

    def key(self, request_id: str) -> str:
        return super().key(request_id).rpartition(":")[2]  # the id's hex

    def _run(self, script: str, request_id_hex: str, *args: Any) -> Any:
        keys = [self.genesis_key, self.prefix]
        result = self.run_script(script, keys, [self.genesis, request_id_hex, *args])
        if result == FORGOT:
            raise UnsafeStoreConfig("the store's identity changed since this ledger opened")
        return result

    def write(self, key: str, token: str) -> bool:
        return bool(self._run(SPEND, key, token, self.lag))

    def read_back(self, key: str, failure: Exception) -> bytes:
        try:
            stored = self._run(GET, key)
        except redis.RedisError as exc:
            raise LedgerUnavailable(f"spend failed ({failure}); outcome unknown ({exc})") from exc
        if stored is None:
            raise LedgerUnavailable(f"spend did not land: {failure}") from failure
        return bytes(stored)

    def read(self, key: str) -> bool:
        try:
            return bool(self._run(EXISTS, key))
        except redis.RedisError as exc:
            raise LedgerUnavailable(f"is_spent failed: {exc}") from exc

    def spent_ids(self) -> Any:
        return iter(())  # not listed (L1 is not what this model is for)


class Synchronous(Replicated):
    lag = 0


class _Factory:
    """Opens ``cls`` on LEDGER_ZOO_REDIS and carries the failover hook, which fails over
    every store this process opened (``renames``: a lossy failover gets a new genesis)."""

    def __init__(self, cls: type[Replicated], *, renames: bool) -> None:
        self.cls = cls
        self.renames = renames
        self.__name__ = self.__qualname__ = cls.__name__

    def __call__(self, ctx: LedgerContext) -> Any:
        address = redis_address()
        with _lock:
            _opened.add((*address, ctx.store))
        return build(self.cls, ctx)

    def ledger_failover(self) -> int:
        """Promote each store's replica at once (no catch-up first); the writes lost."""
        lost = 0
        with _lock:
            stores = sorted(_opened)
        for host, port, label in stores:
            client = redis.Redis(host=host, port=port, socket_timeout=10.0)
            try:
                hexed = label.encode().hex()
                keys = [f"zoo-id:{hexed}", f"zoo-rep:{hexed}:"]
                renames = "1" if self.renames else "0"
                lost += int(client.eval(FAILOVER, 2, *keys, renames, uuid.uuid4().hex))
            finally:
                client.close()
        return lost


loses_spends_on_failover = _Factory(Replicated, renames=False)
renames_on_lossy_failover = _Factory(Replicated, renames=True)
synchronous = _Factory(Synchronous, renames=False)
