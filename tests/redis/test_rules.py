"""The Redis rules without a server: keys, replies, plans and the safety verdicts."""

from __future__ import annotations

import pytest
from redis.crc import key_slot

from ledger_core.errors import (
    AmbiguousSpend,
    InvalidLedgerURL,
    LedgerUnavailable,
    UnsafeStoreConfig,
)
from ledger_redis import rules
from ledger_redis.rules import RedisOptions, ServerFacts, SpendPlan

TOKEN = b"\x01" * 16
OTHER = b"\x02" * 16


def test_keys_never_collide_across_namespaces() -> None:
    assert rules.record_key("a", b"b:c") != rules.record_key("a:b", b"c")
    assert rules.genesis_key("a") != rules.genesis_key("b")
    # no record key can equal a genesis key: the prefixes differ before any data
    assert not rules.record_key("x", b"y").startswith(rules.GENESIS_PREFIX)


@pytest.mark.parametrize("tag", ["{user1}", "{a}", "{x}{y}", "{{}}"])
def test_hash_tags_in_ids_do_not_pick_the_slot(tag: str) -> None:
    # With the leading empty tag, Cluster hashes the whole key: ids sharing a {tag}
    # spread over slots instead of piling onto the tag's slot.
    slots = {key_slot(rules.record_key("ns", f"{tag}{i}".encode())) for i in range(50)}
    assert len(slots) > 40
    assert key_slot(rules.record_key("ns", f"{tag}1".encode())) != key_slot(tag[1:-1].encode())


def test_key_is_exact_bytes_of_the_id() -> None:
    for raw in (b"*", b"a?b", b"[ab]", b"line\nbreak", b"\x00", "é".encode()):
        assert rules.record_key("ns", raw).endswith(b":" + raw)


def test_setnx_plan_outcomes() -> None:
    plan = SpendPlan.build(RedisOptions(), (7, 0, 15), driver_retries=False)
    assert plan.spend_commands(b"k", TOKEN) == [("SETNX", b"k", TOKEN)]
    assert plan.spend_outcome([1], TOKEN) is True
    assert plan.spend_outcome([0], TOKEN) is False
    with pytest.raises(LedgerUnavailable):
        plan.spend_outcome([b"OK"], TOKEN)


def test_resolve_compares_tokens() -> None:
    plan = SpendPlan.build(RedisOptions(), (7, 0), driver_retries=False)
    failure = rules.ReplyLost("lost")
    assert plan.resolve_commands(b"k", TOKEN) == [("SET", b"k", TOKEN, "NX", "GET")]
    assert plan.resolve_outcome([None], TOKEN, failure) is True  # absent: the retry wrote it
    assert plan.resolve_outcome([TOKEN], TOKEN, failure) is True  # the lost write was ours
    assert plan.resolve_outcome([OTHER], TOKEN, failure) is False  # another spend's


def test_before_redis_7_resolve_is_one_script() -> None:
    plan = SpendPlan.build(RedisOptions(), (6, 2, 14), driver_retries=False)
    assert plan.resolve_command(b"k", TOKEN)[0] == "EVAL"


def test_retrying_client_spends_with_set_nx_get() -> None:
    plan = SpendPlan.build(RedisOptions(), (7, 0), driver_retries=True)
    assert plan.spend_commands(b"k", TOKEN) == [("SET", b"k", TOKEN, "NX", "GET")]
    assert plan.spend_outcome([TOKEN], TOKEN) is True  # a resend found our own write
    assert plan.spend_outcome([OTHER], TOKEN) is False
    with pytest.raises(UnsafeStoreConfig):
        SpendPlan.build(RedisOptions(), (6, 2), driver_retries=True)


def test_wait_shortfall_is_ambiguous() -> None:
    plan = SpendPlan.build(RedisOptions(wait_replicas=2), (7, 0), driver_retries=False)
    assert plan.spend_commands(b"k", TOKEN)[1] == ("WAIT", 2, 1000)
    assert plan.spend_outcome([1, 2], TOKEN) is True
    assert plan.spend_outcome([0, 0], TOKEN) is False  # lost the race: no ack needed
    with pytest.raises(AmbiguousSpend, match="1 of 2 replicas"):
        plan.spend_outcome([1, 1], TOKEN)
    # a resolve that finds the lost write cannot vouch for its replication
    with pytest.raises(AmbiguousSpend):
        plan.resolve_outcome([TOKEN, 2], TOKEN, rules.ReplyLost("lost"))
    assert plan.resolve_outcome([None, 2], TOKEN, rules.ReplyLost("lost")) is True


def test_waitaof_needs_7_2_and_no_cluster() -> None:
    with pytest.raises(UnsafeStoreConfig, match=r"7\.2"):
        SpendPlan.build(RedisOptions(wait_aof=True), (7, 0), driver_retries=False)
    plan = SpendPlan.build(RedisOptions(wait_aof=True), (7, 2), driver_retries=False)
    assert plan.spend_commands(b"k", TOKEN)[1][0] == "WAITAOF"
    with pytest.raises(AmbiguousSpend):
        plan.spend_outcome([1, [0, 0]], TOKEN)
    assert plan.spend_outcome([1, [1, 0]], TOKEN) is True
    with pytest.raises(InvalidLedgerURL, match="Cluster"):
        SpendPlan.build(RedisOptions(wait_replicas=1), (7, 0), driver_retries=True)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"timeout": "0"}, "timeout"),
        ({"wait_replicas": "x"}, "integer"),
        ({"wait_replicas": "1", "wait_timeout": "9"}, "shorter"),
        ({"trust_config": "maybe"}, "true or false"),
    ],
)
def test_bad_options(options: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidLedgerURL, match=message):
        RedisOptions.from_mapping(options)


SAFE = ServerFacts(
    node="n",
    version=(7, 0),
    role="master",
    maxmemory_policy="noeviction",
    aof_enabled=False,
    save="3600 1",
    appendfsync="everysec",
)


def _reason(facts: ServerFacts, **options: object) -> str | None:
    return rules.assess(facts, RedisOptions.from_mapping(options))[0]


def test_verdicts() -> None:
    from dataclasses import replace

    assert _reason(SAFE) is None
    assert "allkeys-lru" in (_reason(replace(SAFE, maxmemory_policy="allkeys-lru")) or "")
    assert _reason(replace(SAFE, maxmemory_policy="volatile-lru")) is None  # ours never expire
    assert "replica" in (_reason(replace(SAFE, role="slave")) or "")
    assert "no persistence" in (_reason(replace(SAFE, save="")) or "")
    assert _reason(replace(SAFE, save="", aof_enabled=True)) is None
    assert "require_aof" in (_reason(SAFE, require_aof="true") or "")
    durable = replace(SAFE, aof_enabled=True, appendfsync="always", save="")
    assert _reason(durable, require_aof="true") is None
    # CONFIG blocked: persistence unknown unless AOF shows in INFO, or trusted
    blocked = replace(SAFE, save=None, appendfsync=None, config_error="NOPERM")
    assert "trust_config" in (_reason(blocked) or "")
    assert _reason(blocked, trust_config="true") is None
    assert _reason(replace(blocked, aof_enabled=True)) is None
    # trust never overrides what the server shows
    assert _reason(replace(blocked, maxmemory_policy="allkeys-lfu"), trust_config="1")


def test_info_and_config_parsing() -> None:
    info = rules.parse_info(b"# Server\r\nredis_version:7.0.15\r\nrole:master\r\n")
    assert info == {"redis_version": "7.0.15", "role": "master"}
    assert rules.parse_version("7.2.4-rc1") == (7, 2, 4)
    assert rules.parse_config([b"save", b"", b"appendfsync", b"always"]) == {
        "save": "",
        "appendfsync": "always",
    }


def test_driver_errors_map_to_the_ledger_tree() -> None:
    from redis import exceptions as rx

    from ledger_core.errors import LedgerUnavailable

    lost = rules.driver_error(rx.ConnectionError("closed"), "spend", sent=True)
    assert isinstance(lost, rules.ReplyLost)
    refused = rules.driver_error(rx.ConnectionError("refused"), "spend", sent=False)
    assert type(refused) is LedgerUnavailable
    exhausted = rules.driver_error(rx.MaxConnectionsError(), "spend", sent=True)
    assert type(exhausted) is LedgerUnavailable  # no connection: nothing was sent
    readonly = rules.driver_error(rx.ReadOnlyError("READONLY replica"), "spend", sent=True)
    assert isinstance(readonly, UnsafeStoreConfig)
    oom = rules.driver_error(rx.OutOfMemoryError("OOM"), "spend", sent=True)
    assert type(oom) is LedgerUnavailable  # an error reply: the command did not apply
    gave_up = rules.driver_error(rx.RedisClusterException("no node"), "spend", sent=True)
    assert isinstance(gave_up, rules.ReplyLost)
    odd = rules.driver_error(ValueError("parser"), "is_spent", sent=True)
    assert isinstance(odd, LedgerUnavailable)
