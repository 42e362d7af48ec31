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
from ledger_core.protocol import Durability
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
def test_hash_tags_in_ids_do_not_pick_the_slot_standalone(tag: str) -> None:
    # The standalone layout (unchanged): a {tag} inside an id is data, never a tag.
    slots = {key_slot(rules.record_key("ns", f"{tag}{i}".encode())) for i in range(50)}
    assert len(slots) > 40
    assert key_slot(rules.record_key("ns", f"{tag}1".encode())) != key_slot(tag[1:-1].encode())


def test_key_is_exact_bytes_of_the_id() -> None:
    for raw in (b"*", b"a?b", b"[ab]", b"line\nbreak", b"\x00", "é".encode()):
        assert rules.record_key("ns", raw).endswith(b":" + raw)


GENESIS = b"0" * 32


def _plan(version: tuple[int, ...] | None = (7, 0, 15), **kwargs: object) -> SpendPlan:
    return SpendPlan.build(
        RedisOptions(**kwargs),  # type: ignore[arg-type]
        version,
        driver_retries=False,
        keys=rules.Keys("ns"),
        genesis=GENESIS,
    )


def test_spend_is_one_genesis_proving_script() -> None:
    plan = _plan()
    (command,) = plan.spend_commands(b"k", TOKEN)
    assert command[0] == "EVALSHA"
    assert command[2:] == (2, rules.genesis_key("ns"), rules.record_key("ns", b"k"), GENESIS, TOKEN)
    assert plan.spend_outcome([None], TOKEN) is True  # absent: written now
    assert plan.spend_outcome([TOKEN], TOKEN) is True  # a resend found our own write
    assert plan.spend_outcome([OTHER], TOKEN) is False
    with pytest.raises(LedgerUnavailable):
        plan.spend_outcome([1], TOKEN)
    (read,) = plan.read_commands(b"k")
    assert read[0] == "EVALSHA"
    assert read[3:] == (rules.genesis_key("ns"), rules.record_key("ns", b"k"), GENESIS)


def test_resolve_compares_tokens() -> None:
    plan = _plan()
    failure = rules.ReplyLost("lost")
    assert plan.resolve_commands(b"k", TOKEN) == plan.spend_commands(b"k", TOKEN)
    assert plan.resolve_outcome([None], TOKEN, failure) is True  # absent: the retry wrote it
    assert plan.resolve_outcome([TOKEN], TOKEN, failure) is True  # the lost write was ours
    assert plan.resolve_outcome([OTHER], TOKEN, failure) is False  # another spend's


def test_scripts_declare_themselves_for_redis_7_only() -> None:
    # The #!lua shebang without no-writes makes a replica refuse reads (Redis >= 7);
    # older servers would not parse it. Unknown counts as 7: a refusal fails closed.
    assert _plan((7, 0)).read_script.body.startswith("#!lua\n")
    assert "no-writes" not in _plan((7, 0)).read_script.body
    assert _plan(None).read_script.body.startswith("#!lua")
    assert not _plan((6, 2, 14)).read_script.body.startswith("#!")
    evals = rules.as_eval(_plan().spend_commands(b"k", TOKEN))
    assert evals[0][0] == "EVAL"
    assert evals[0][1] == _plan().spend_script.body


def test_cluster_keys_share_the_namespace_slot() -> None:
    keys = rules.Keys("ns", cluster=True)
    slot = key_slot(keys.genesis)
    assert all(key_slot(keys.record(f"{{t}}{i}".encode())) == slot for i in range(50))
    other = rules.Keys("ns2", cluster=True)
    assert other.record(b"x") != keys.record(b"x")
    assert keys.record(b"b:c") != rules.Keys("ns:b", cluster=True).record(b"c")
    assert keys.legacy_genesis == rules.genesis_key("ns")
    assert rules.Keys("ns").legacy_genesis is None


def test_wait_shortfall_is_ambiguous() -> None:
    plan = _plan(wait_replicas=2)
    assert plan.spend_commands(b"k", TOKEN)[1] == ("WAIT", 2, 1000)
    assert plan.spend_outcome([None, 2], TOKEN) is True
    assert plan.spend_outcome([OTHER, 0], TOKEN) is False  # lost the race: no ack needed
    with pytest.raises(AmbiguousSpend, match="1 of 2 replicas"):
        plan.spend_outcome([None, 1], TOKEN)
    # a resolve that finds the lost write cannot vouch for its replication
    with pytest.raises(AmbiguousSpend):
        plan.resolve_outcome([TOKEN, 2], TOKEN, rules.ReplyLost("lost"))
    assert plan.resolve_outcome([None, 2], TOKEN, rules.ReplyLost("lost")) is True


def test_waitaof_needs_7_2_and_no_cluster() -> None:
    with pytest.raises(UnsafeStoreConfig, match=r"7\.2"):
        SpendPlan.build(RedisOptions(wait_aof=True), (7, 0), driver_retries=False)
    plan = _plan((7, 2), wait_aof=True)
    assert plan.spend_commands(b"k", TOKEN)[1][0] == "WAITAOF"
    with pytest.raises(AmbiguousSpend):
        plan.spend_outcome([None, [0, 0]], TOKEN)
    assert plan.spend_outcome([None, [1, 0]], TOKEN) is True
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
    aof_enabled=True,
    save="3600 1",
    appendfsync="always",
)


def _reason(facts: ServerFacts, **options: object) -> str | None:
    return rules.assess(facts, RedisOptions.from_mapping(options))[0]


def test_verdicts() -> None:
    from dataclasses import replace

    assert _reason(SAFE) is None
    assert "allkeys-lru" in (_reason(replace(SAFE, maxmemory_policy="allkeys-lru")) or "")
    assert _reason(replace(SAFE, maxmemory_policy="volatile-lru")) is None  # ours never expire
    assert "replica" in (_reason(replace(SAFE, role="slave")) or "")
    assert "no persistence" in (_reason(replace(SAFE, aof_enabled=False, save="")) or "")
    assert "snapshots only" in (_reason(replace(SAFE, aof_enabled=False)) or "")
    everysec = replace(SAFE, appendfsync="everysec")
    # everysec postpones the AOF write while an fsync runs and replies anyway: kill -9
    # can lose an acknowledged spend, so no option makes it prove.
    assert "postpones" in (_reason(everysec) or "")
    assert "postpones" in (_reason(everysec, durability="process") or "")
    page_cache = replace(SAFE, appendfsync="no")
    assert "durability=process" in (_reason(page_cache) or "")  # process level only
    assert _reason(page_cache, durability="process") is None
    assert "require_aof" in (_reason(page_cache, durability="process", require_aof="true") or "")
    durable = SAFE
    assert _reason(durable) is None
    assert _reason(durable, require_aof="true") is None
    assert rules.assess(durable, RedisOptions())[2] == Durability.MACHINE
    assert rules.assess(everysec, RedisOptions())[2] == Durability.NONE
    assert rules.assess(page_cache, RedisOptions())[2] == Durability.PROCESS
    assert rules.assess(everysec, RedisOptions(wait_aof=True))[2] == Durability.MACHINE
    # CONFIG blocked: appendfsync unknown unless trusted
    blocked = replace(SAFE, save=None, appendfsync=None, config_error="NOPERM")
    assert "trust_config" in (_reason(blocked) or "")
    assert _reason(blocked, trust_config="true") is None
    assert rules.assess(blocked, RedisOptions(trust_config=True))[2] == Durability.MACHINE
    # INFO blocked too: nothing is known, nothing is zero
    unknown = ServerFacts(node="n", info_error="NOPERM", config_error="NOPERM")
    assert "trust_config" in (_reason(unknown) or "")
    assert _reason(unknown, trust_config="true") is None
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
