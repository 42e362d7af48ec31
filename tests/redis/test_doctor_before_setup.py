"""``decision-ledger doctor`` on a Redis namespace not set up yet: the server's settings
are read and judged as for a ledger, and nothing is written (no genesis key)."""

from __future__ import annotations

import pytest
import redis

from ledger_core.cli import main
from ledger_redis.commands import Keys
from tests.servers import redis as servers
from tests.servers.common import serve_or_skip


def test_a_fresh_namespace_is_vetted_before_setup(
    redis_url: str, namespace: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["doctor", redis_url, "--namespace", namespace]) == 1
    out = capsys.readouterr().out
    assert f"namespace '{namespace}' (its genesis key)" in out
    assert "does not exist yet" in out
    assert "PASS  versions       Redis" in out
    assert "PASS  configuration  appendonly yes, appendfsync always" in out
    assert "1 check(s) failed" in out  # the store, and only it
    assert redis.Redis.from_url(redis_url).exists(Keys(namespace, False).genesis) == 0


def test_an_unsafe_server_fails_its_settings_before_setup(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for server in serve_or_skip(lambda: servers.local_redis(servers.EVERYSEC)):
        assert main(["doctor", server.url]) == 1
    out = capsys.readouterr().out
    assert "FAIL  configuration  appendonly yes, appendfsync everysec" in out
    assert "2 check(s) failed" in out


def test_an_unreachable_server_is_exit_3(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "redis://:pw-secret@127.0.0.1:1/0"]) == 3
    assert "pw-secret" not in "".join(capsys.readouterr())
