"""Redis's ``remove_scratch`` hook: ``SCAN MATCH`` + ``UNLINK`` of a check's genesis and
record keys (every master of a Cluster); every other key stays."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import redis

from ledger_core import open_ledger
from ledger_redis.testing import scratch_namespace
from tests.scratch_removal import exercise, fill, inside, new_prefix, refuses, remove


def _left(url: str, prefix: str, cluster: bool) -> list[bytes]:
    """Every key anywhere that names a namespace under ``prefix`` (none may stay)."""
    if cluster:
        client: redis.RedisCluster = redis.RedisCluster.from_url(url.replace("+cluster", ""))
        keys = list(client.scan_iter(match=b"*", count=1000, target_nodes=client.PRIMARIES))
        client.close()
    else:
        with redis.Redis.from_url(url) as plain:
            keys = list(plain.scan_iter(match=b"*", count=1000))
    return [key for key in keys if scratch_namespace(key, prefix, cluster) is not None]


def test_removes_exactly_the_scratch_namespaces(redis_url: str) -> None:
    exercise(redis_url)


def _every_key_goes(url: str, cluster: bool) -> None:
    prefix = new_prefix()
    for name in inside(prefix):
        fill(url, name, prefix)
    # A genesis, two ids and a marker per namespace.
    assert len(_left(url, prefix, cluster)) == 4 * len(inside(prefix))
    assert remove(url, prefix) == len(inside(prefix))
    assert _left(url, prefix, cluster) == []


def test_removes_every_key_of_them(redis_url: str) -> None:
    _every_key_goes(redis_url, cluster=False)


def test_cluster_removes_on_every_master(cluster_url: str) -> None:
    exercise(cluster_url)


def test_cluster_removes_every_key_of_them(cluster_url: str) -> None:
    _every_key_goes(cluster_url, cluster=True)


def test_refuses_any_other_prefix(redis_url: str, cluster_url: str) -> None:
    refuses(redis_url)
    refuses(cluster_url)


LAST_LINE = re.compile(
    r"scratch: removed the (\d+) namespace\(s\) named (ledger-conformance-[0-9a-z]+-)\* this "
    r"run wrote; nothing else in the store was touched"
)


def test_the_cli_check_leaves_nothing_behind(redis_url: str, tmp_path: Path) -> None:
    """``decision-ledger check URL`` as a user runs it (the whole quick profile: about a
    minute here): its scratch line says what it removed, and the store keeps none of it."""
    cli = Path(sys.executable).with_name("decision-ledger")
    done = subprocess.run(
        [str(cli), "check", redis_url],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=900,
        check=False,
    )
    shown = f"{done.stdout[-6000:]}\n{done.stderr[-3000:]}"
    # 0 (passed) or 1 (a clause failed, shown above): either way the scratch goes.
    assert done.returncode in (0, 1), shown
    *_, scratch, log = done.stdout.strip().splitlines()  # then the line naming the log
    assert log.startswith("pytest output: "), shown
    found = LAST_LINE.fullmatch(scratch)
    assert found, shown
    assert int(found.group(1)) >= 10, shown  # the quick profile writes dozens
    prefix = found.group(2)
    lister: Any = open_ledger(redis_url, namespace="t-scratch-lister")
    try:
        assert not [name for name in lister.namespaces() if name.startswith(prefix)]
    finally:
        lister.close()
    assert _left(redis_url, prefix, cluster=False) == []
    assert list(tmp_path.iterdir()) == []  # nothing in the working directory either


def test_a_ledger_never_imports_its_test_support(redis_url: str, cluster_url: str) -> None:
    """Opening and using a ledger (sync and async, standalone and Cluster) leaves
    ``ledger_redis.testing`` unimported; the backends name it only as a reference."""
    code = (
        "import asyncio, sys\n"
        "from ledger_core import open_async_ledger, open_ledger\n"
        "from ledger_redis import BACKEND, CLUSTER_BACKEND, SENTINEL_BACKEND\n"
        "for url in sys.argv[1:]:\n"
        "    ledger = open_ledger(url, namespace='t-no-testing')\n"
        "    ledger.spend('a'); ledger.is_spent('a'); list(ledger.spent_ids()); ledger.close()\n"
        "    async def main():\n"
        "        aledger = await open_async_ledger(url, namespace='t-no-testing')\n"
        "        await aledger.spend('b'); await aledger.aclose()\n"
        "    asyncio.run(main())\n"
        "assert 'ledger_redis.testing' not in sys.modules, 'imported'\n"
        "for backend in (BACKEND, CLUSTER_BACKEND, SENTINEL_BACKEND):\n"
        "    module, _, name = backend.testing.partition(':')\n"
        "    assert module == 'ledger_redis.testing' and name.endswith('HOOKS'), backend.testing\n"
        "print('CLEAN')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, redis_url, cluster_url],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "CLEAN" in done.stdout
