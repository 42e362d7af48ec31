"""``decision-ledger doctor`` on a Redis ledger: its versions and configuration lines,
judged as the open judged the server (never a pass where the ledger refused)."""

from __future__ import annotations

import itertools

import pytest

from ledger_core.doctor import FAIL, INFO, PASS
from ledger_core.protocol import Durability
from ledger_redis.identity import ServerFacts, doctor_checks, judge, ledger_info
from ledger_redis.options import RedisOptions
from tests.doctor_report import doctor, named
from tests.servers import redis as servers


def _url(base: str, namespace: str, extra: str = "") -> str:
    sep = "&" if "?" in base else "?"
    return f"{base}{sep}namespace={namespace}{extra}"


def test_a_persisting_server_passes_each_line(
    redis_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = doctor(_url(redis_url, "doctor-plain"), capsys, setup=True)
    (versions,) = named(lines, "versions")
    assert versions.status == "PASS"
    assert versions.detail.startswith("Redis ")
    assert "redis-py " in versions.detail
    details = [line.detail for line in named(lines, "configuration")]
    assert details == [
        "role master",
        "maxmemory-policy noeviction",
        "appendonly yes, appendfsync always",
    ]


def test_appendfsync_no_fails_its_line_unless_process_durability_is_accepted(
    page_cache_server: servers.RedisServer, capsys: pytest.CaptureFixture[str]
) -> None:
    accepted = _url(page_cache_server.url, "doctor-page-cache", "&durability=process")
    lines = doctor(accepted, capsys, setup=True)
    assert named(lines, "configuration")[-1] == (
        "PASS",
        "configuration",
        "appendonly yes, appendfsync no, accepted with durability=process",
    )
    lines = doctor(_url(page_cache_server.url, "doctor-page-cache"), capsys)
    persistence = named(lines, "configuration")[-1]
    assert persistence.status == "FAIL"
    assert persistence.detail.startswith("appendonly yes, appendfsync no: a spend survives")


def test_appendonly_no_and_an_evicting_policy_fail_their_lines(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with servers.local_redis(servers.PLAIN) as server:
        url = _url(server.url, "doctor-unsafe")
        assert doctor(url, capsys, setup=True)  # safe first: the genesis is written
        import redis

        client = redis.Redis.from_url(server.url)
        client.config_set("appendonly", "no")
        client.config_set("maxmemory-policy", "allkeys-lru")
        client.close()
        lines = doctor(url, capsys)
    statuses = {line.detail.split(":")[0]: line.status for line in named(lines, "configuration")}
    assert statuses == {
        "role master": "PASS",
        "maxmemory-policy allkeys-lru": "FAIL",
        "appendonly no, save ''": "FAIL",
    }


def _facts(**kw: object) -> ServerFacts:
    base: dict[str, object] = {
        "node": "redis://h:1/0",
        "version": (7, 0, 15),
        "role": "master",
        "maxmemory_policy": "noeviction",
        "aof_enabled": True,
        "save": "",
        "appendfsync": "always",
    }
    base.update(kw)
    return ServerFacts(**base)  # type: ignore[arg-type]


def _checks(facts: ServerFacts, options: RedisOptions) -> list[tuple[str, str]]:
    verdict = judge([facts], options)
    info = ledger_info(
        kind="redis",
        location="redis://h:1/0",
        namespace="default",
        genesis=b"0" * 32,
        verdict=verdict,
    )
    return [(c.status, c.detail) for c in doctor_checks([facts], options, info, "5.0.0")]


@pytest.mark.parametrize(
    ("version", "options", "status"),
    [
        ((2, 6, 17), RedisOptions(), FAIL),
        ((2, 8, 0), RedisOptions(), PASS),
        ((7, 0, 15), RedisOptions(wait_aof=True), FAIL),
        ((7, 2, 4), RedisOptions(wait_aof=True), PASS),
        (None, RedisOptions(trust_config=True), INFO),
    ],
)
def test_the_version_is_judged_against_what_the_commands_need(
    version: tuple[int, ...] | None, options: RedisOptions, status: str
) -> None:
    checks = _checks(_facts(version=version), options)
    assert checks[0][0] == status, checks
    if status == FAIL:
        assert "older than" in checks[0][1]


def test_every_combination_of_facts_fails_a_line_exactly_when_the_open_refuses() -> None:
    """One source of truth: whatever the facts and options, the lines fail iff the
    ledger's own verdict refuses to prove."""
    grid = itertools.product(
        ("master", "slave", None),
        ("noeviction", "allkeys-lru", "volatile-lru", None),
        (True, False, None),
        ("always", "everysec", "no", None),
        (
            RedisOptions(),
            RedisOptions(durability=Durability.PROCESS),
            RedisOptions(trust_config=True),
            RedisOptions(wait_aof=True),
            RedisOptions(require_aof=True, durability=Durability.PROCESS),
        ),
    )
    for role, policy, aof, fsync, options in grid:
        facts = _facts(role=role, maxmemory_policy=policy, aof_enabled=aof, appendfsync=fsync)
        refused = judge([facts], options).reason is not None
        failed = [d for s, d in _checks(facts, options)[1:] if s == FAIL]
        assert bool(failed) == refused, (facts, options, failed)
        own = [d for d in failed if d != judge([facts], options).reason]
        assert bool(own) == refused, (facts, options, failed)  # an itemized line carries it


def test_a_cluster_shows_each_node_and_fails_the_replica() -> None:
    nodes = [_facts(node="node a:1"), _facts(node="node b:2", role="slave")]
    options = RedisOptions()
    info = ledger_info(
        kind="redis-cluster",
        location="redis+cluster://a:1",
        namespace="default",
        genesis=b"0" * 32,
        verdict=judge(nodes, options),
    )
    checks = doctor_checks(nodes, options, info, "5.0.0")
    assert checks[0].detail.startswith("oldest of 2 Redis servers 7.0.15")
    failed = [c.detail for c in checks if c.status == FAIL]
    assert failed == ["node b:2: role slave: its data is a copy"]
    assert len(checks) == 1 + 2 * 3
