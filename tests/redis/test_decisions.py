"""The Redis decisions without a server: keys, replies, plans, options and the safety verdicts."""

from __future__ import annotations

from typing import Any
from unittest import mock

import pytest
from redis.crc import key_slot

from ledger_core.doctor import parse_version
from ledger_core.errors import (
    AmbiguousSpend,
    InvalidLedgerURL,
    LedgerUnavailable,
    UnsafeStoreConfig,
)
from ledger_core.opening import OpenRequest
from ledger_core.protocol import Durability
from ledger_redis import commands, errors, identity
from ledger_redis.commands import Plan
from ledger_redis.identity import ServerFacts
from ledger_redis.ledger import Pool, RedisLedger, spend_outcomes
from ledger_redis.options import RedisOptions

TOKEN = b"\x01" * 16
OTHER = b"\x02" * 16


def test_keys_never_collide_across_namespaces() -> None:
    assert commands.record_key("a", b"b:c") != commands.record_key("a:b", b"c")
    assert commands.genesis_key("a") != commands.genesis_key("b")
    # no record key can equal a genesis key: the prefixes differ before any data
    assert not commands.record_key("x", b"y").startswith(commands.GENESIS_PREFIX)


@pytest.mark.parametrize("tag", ["{user1}", "{a}", "{x}{y}", "{{}}"])
def test_hash_tags_in_ids_do_not_pick_the_slot_standalone(tag: str) -> None:
    # The standalone layout (unchanged): a {tag} inside an id is data, never a tag.
    slots = {key_slot(commands.record_key("ns", f"{tag}{i}".encode())) for i in range(50)}
    assert len(slots) > 40
    assert key_slot(commands.record_key("ns", f"{tag}1".encode())) != key_slot(tag[1:-1].encode())


def test_key_is_exact_bytes_of_the_id() -> None:
    for raw in (b"*", b"a?b", b"[ab]", b"line\nbreak", b"\x00", "é".encode()):
        assert commands.record_key("ns", raw).endswith(b":" + raw)


GENESIS = b"0" * 32


def _options(**options: object) -> RedisOptions:
    return RedisOptions.from_request(OpenRequest.build("redis://h/0", **options))


def _plan(version: tuple[int, ...] | None = (7, 0, 15), **kwargs: object) -> Plan:
    return commands.plan_for(
        RedisOptions(**kwargs),  # type: ignore[arg-type]
        version,
        cluster=False,
        keys=commands.Keys("ns"),
        genesis=GENESIS,
    )


class _Recorder(Pool):
    """A link that records each trip and answers it with ``replies``: what a ledger
    sends and how it judges the answers, without a server."""

    def __init__(self, replies: list[Any]) -> None:
        super().__init__(object(), "redis://recorder/0")
        self.replies = replies
        self.sent: list[list[commands.Command]] = []

    def call(self, commands: Any, what: str, deadline: Any, *, every: bool = False) -> list[Any]:
        self.sent.append(list(commands))
        return self.replies


def _ledger(plan: Plan, replies: list[Any]) -> tuple[RedisLedger, _Recorder]:
    """A ledger opened on ``plan`` (the open's reads skipped), on a recording link."""
    link = _Recorder(replies)
    ledger = RedisLedger(link, "ns", RedisOptions())
    ledger._prepare(plan)
    return ledger, link


def _spend_commands(plan: Plan, request_id: bytes, value: bytes) -> list[commands.Command]:
    """What one spend sends: the ledger's own commands, recorded."""
    ack = [1, 9] if plan.wait is not None and plan.wait[0] == "WAITAOF" else 9
    ledger, link = _ledger(plan, [None, ack])
    token, digest = value[:16], value[16:] or None
    with mock.patch("ledger_redis.ledger.new_token", return_value=token):
        assert ledger._spend(request_id, digest) is True
    (sent,) = link.sent
    return sent


def _read_commands(plan: Plan, request_id: bytes) -> list[commands.Command]:
    ledger, link = _ledger(plan, [0])
    ledger._is_spent(request_id)
    (sent,) = link.sent
    return sent


def _spend_outcome(
    plan: Plan, replies: list[Any], value: bytes, failure: BaseException | None = None
) -> bool:
    """One spend's answer: a batch of one."""
    return spend_outcomes(_Recorder([]), plan.wait, replies, [value], failure, "spend")[0]


def test_spend_is_one_genesis_proving_script() -> None:
    plan = _plan()
    (command,) = _spend_commands(plan, b"k", TOKEN)
    assert command[0] == "EVALSHA"
    genesis, record = commands.genesis_key("ns"), commands.record_key("ns", b"k")
    assert command[2:] == (2, genesis, record, GENESIS, TOKEN)
    assert _spend_outcome(plan, [None], TOKEN) is True  # absent: written now
    assert _spend_outcome(plan, [TOKEN], TOKEN) is True  # a resend found our own write
    assert _spend_outcome(plan, [OTHER], TOKEN) is False
    with pytest.raises(LedgerUnavailable):
        _spend_outcome(plan, [1], TOKEN)
    (read,) = _read_commands(plan, b"k")
    assert read[0] == "EVALSHA"
    assert read[3:] == (commands.genesis_key("ns"), commands.record_key("ns", b"k"), GENESIS)


def test_resolve_compares_tokens() -> None:
    plan = _plan()
    failure = errors.ReplyLost("lost")
    # absent: the retry wrote it; found: the lost write was ours
    assert _spend_outcome(plan, [None], TOKEN, failure) is True
    assert _spend_outcome(plan, [TOKEN], TOKEN, failure) is True
    assert _spend_outcome(plan, [OTHER], TOKEN, failure) is False  # another spend's


def test_scripts_declare_themselves_for_redis_7_only() -> None:
    # The #!lua shebang without no-writes makes a replica refuse reads (Redis >= 7);
    # older servers would not parse it. Unknown counts as 7: a refusal fails closed.
    assert _plan((7, 0)).read_script.body.startswith("#!lua\n")
    assert "no-writes" not in _plan((7, 0)).read_script.body
    assert _plan(None).read_script.body.startswith("#!lua")
    assert not _plan((6, 2, 14)).read_script.body.startswith("#!")
    evals = commands.as_eval(_spend_commands(_plan(), b"k", TOKEN))
    assert evals[0][0] == "EVAL"
    assert evals[0][1] == _plan().spend_script.body


def test_cluster_keys_share_the_namespace_slot() -> None:
    keys = commands.Keys("ns", cluster=True)
    slot = key_slot(keys.genesis)
    assert all(key_slot(keys.record(f"{{t}}{i}".encode())) == slot for i in range(50))
    other = commands.Keys("ns2", cluster=True)
    assert other.record(b"x") != keys.record(b"x")
    assert keys.record(b"b:c") != commands.Keys("ns:b", cluster=True).record(b"c")
    assert keys.legacy_genesis == commands.genesis_key("ns")
    assert commands.Keys("ns").legacy_genesis is None


def test_wait_shortfall_is_ambiguous() -> None:
    plan = _plan(wait_replicas=2)
    assert _spend_commands(plan, b"k", TOKEN)[1] == ("WAIT", 2, 1000)
    assert _spend_outcome(plan, [None, 2], TOKEN) is True
    assert _spend_outcome(plan, [OTHER, 0], TOKEN) is False  # lost the race: no ack needed
    with pytest.raises(AmbiguousSpend, match="1 of 2 replicas"):
        _spend_outcome(plan, [None, 1], TOKEN)
    # a resolve that finds the lost write cannot vouch for its replication
    with pytest.raises(AmbiguousSpend):
        _spend_outcome(plan, [TOKEN, 2], TOKEN, errors.ReplyLost("lost"))
    assert _spend_outcome(plan, [None, 2], TOKEN, errors.ReplyLost("lost")) is True


def test_waitaof_needs_7_2_and_no_cluster() -> None:
    with pytest.raises(UnsafeStoreConfig, match=r"7\.2"):
        commands.plan_for(RedisOptions(wait_aof=True), (7, 0), cluster=False)
    plan = _plan((7, 2), wait_aof=True)
    assert _spend_commands(plan, b"k", TOKEN)[1][0] == "WAITAOF"
    with pytest.raises(AmbiguousSpend):
        _spend_outcome(plan, [None, [0, 0]], TOKEN)
    assert _spend_outcome(plan, [None, [1, 0]], TOKEN) is True
    with pytest.raises(InvalidLedgerURL, match="Cluster"):
        commands.plan_for(RedisOptions(wait_replicas=1), (7, 0), cluster=True)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"timeout": "0"}, "timeout"),
        ({"wait_replicas": "x"}, "whole number"),
        ({"wait_replicas": "1", "wait_timeout": "9"}, "shorter"),
        ({"trust_config": "maybe"}, "true or false"),
    ],
)
def test_bad_options(options: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidLedgerURL, match=message):
        _options(**options)


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
    return identity.assess(facts, _options(**options))[0]


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
    assert identity.assess(durable, RedisOptions())[2] == Durability.MACHINE
    assert identity.assess(everysec, RedisOptions())[2] == Durability.NONE
    assert identity.assess(page_cache, RedisOptions())[2] == Durability.PROCESS
    assert identity.assess(everysec, RedisOptions(wait_aof=True))[2] == Durability.MACHINE
    # CONFIG blocked: appendfsync unknown unless trusted
    blocked = replace(SAFE, save=None, appendfsync=None, config_error="NOPERM")
    assert "trust_config" in (_reason(blocked) or "")
    assert _reason(blocked, trust_config="true") is None
    assert identity.assess(blocked, RedisOptions(trust_config=True))[2] == Durability.MACHINE
    # INFO blocked too: nothing is known, nothing is zero
    unknown = ServerFacts(node="n", info_error="NOPERM", config_error="NOPERM")
    assert "trust_config" in (_reason(unknown) or "")
    assert _reason(unknown, trust_config="true") is None
    # trust never overrides what the server shows
    assert _reason(replace(blocked, maxmemory_policy="allkeys-lfu"), trust_config="1")


def test_info_and_config_parsing() -> None:
    info = identity.parse_info(b"# Server\r\nredis_version:7.0.15\r\nrole:master\r\n")
    assert info == {"redis_version": "7.0.15", "role": "master"}
    assert parse_version("7.2.4-rc1") == (7, 2, 4)
    assert identity.parse_config([b"save", b"", b"appendfsync", b"always"]) == {
        "save": "",
        "appendfsync": "always",
    }


def test_driver_errors_map_to_the_ledger_tree() -> None:
    from redis import exceptions as rx

    from ledger_core.errors import LedgerUnavailable

    lost = errors.driver_error(rx.ConnectionError("closed"), "spend", sent=True)
    assert isinstance(lost, errors.ReplyLost)
    refused = errors.driver_error(rx.ConnectionError("refused"), "spend", sent=False)
    assert type(refused) is LedgerUnavailable
    exhausted = errors.driver_error(rx.MaxConnectionsError(), "spend", sent=True)
    assert type(exhausted) is LedgerUnavailable  # no connection: nothing was sent
    readonly = errors.driver_error(rx.ReadOnlyError("READONLY replica"), "spend", sent=True)
    assert isinstance(readonly, UnsafeStoreConfig)
    oom = errors.driver_error(rx.OutOfMemoryError("OOM"), "spend", sent=True)
    assert type(oom) is LedgerUnavailable  # an error reply: the command did not apply
    gave_up = errors.driver_error(rx.RedisClusterException("no node"), "spend", sent=True)
    assert isinstance(gave_up, errors.ReplyLost)
    odd = errors.driver_error(ValueError("parser"), "is_spent", sent=True)
    assert isinstance(odd, LedgerUnavailable)


def test_spend_as_has_its_own_script_and_compares_digests() -> None:
    plan = _plan()
    digest, other_digest = b"\x03" * 32, b"\x04" * 32
    (command,) = _spend_commands(plan, b"k", TOKEN + digest)
    assert command[1] == plan.spend_as_script.sha != plan.spend_script.sha
    assert command[-1] == TOKEN + digest
    assert commands.as_eval([command])[0][1] == plan.spend_as_script.body  # after NOSCRIPT
    ours = TOKEN + digest
    assert _spend_outcome(plan, [None], ours) is True
    assert _spend_outcome(plan, [ours], ours) is True  # a resend found our write
    assert _spend_outcome(plan, [OTHER + digest], ours) is True  # the same attempt
    assert _spend_outcome(plan, [OTHER + other_digest], ours) is False
    assert _spend_outcome(plan, [OTHER], ours) is False  # a plain spend's record
    assert _spend_outcome(plan, [OTHER + digest], TOKEN) is False  # plain: no re-entry


def test_replication_epoch_and_store_id() -> None:
    from ledger_redis.identity import Replication, judge_replication, replication_from, store_id

    replid = "ab" * 20
    none = replication_from([b"master", b"0", replid.encode(), b"0", b""])
    assert none == Replication("master", False, replid, 0)
    assert none.epoch == b""  # no backlog: nothing to bind to
    some = replication_from([b"master", b"1", replid.encode(), b"2", b"1"])
    assert some.epoch == replid.encode()
    assert some.good == 1
    assert store_id("redis", b"0" * 32, "ns", some.epoch) == f"redis:{'0' * 32}.{replid}:ns"
    assert store_id("redis", b"0" * 32, "ns") == f"redis:{'0' * 32}:ns"
    assert replication_from([b"master", b"1", b"not-hex", b"1", b""]).error is not None
    assert replication_from(RuntimeError("NOPERM")).error is not None
    verdict = identity.Verdict(None, ())
    opts = RedisOptions()
    assert judge_replication(verdict, some, opts).reason is None
    unknown = replication_from(RuntimeError("NOPERM this user has no permissions"))
    assert "failover_may_lose_spends=accept" in (
        judge_replication(verdict, unknown, opts).reason or ""
    )
    trusted = judge_replication(verdict, unknown, RedisOptions(trust_config=True))
    assert trusted.reason is None
    assert trusted.notes
    slave = replication_from([b"slave", b"1", replid.encode(), b"0", b""])
    assert "slave" in (judge_replication(verdict, slave, opts).reason or "")
    # doctor: a line fails exactly when the open refuses
    for rep, options in [
        (none, opts),
        (some, opts),
        (some, RedisOptions(wait_replicas=1)),
        (unknown, opts),
        (unknown, RedisOptions(trust_config=True)),
        (slave, opts),
        (some, RedisOptions(failover_may_lose_spends=True)),
    ]:
        refused = judge_replication(verdict, rep, options).reason is not None
        lines = identity.replication_facts(rep, options, sentinel=True)
        assert lines
        assert any(c.safe is False for c in lines) == refused, (rep, options, lines)


def test_sentinel_urls() -> None:
    from ledger_core.urls import LedgerURL
    from ledger_redis.options import parse

    def target(url: str) -> Any:
        return parse(OpenRequest(LedgerURL.parse(url), options={}))

    one = target("redis+sentinel://app:pa55w0rd@10.0.0.1/prod/2?sentinels=10.0.0.2:26380,h3")
    assert one.service == "prod"
    assert one.sentinels == (("10.0.0.1", 26379), ("10.0.0.2", 26380), ("h3", 26379))
    assert one.location == "redis+sentinel://app:***@10.0.0.1:26379,10.0.0.2:26380,h3:26379/prod/2"
    assert "pa55w0rd" not in repr(one)
    assert one.driver_url.startswith("redis://app:pa55w0rd@sentinel/2")
    for bad in (
        "redis+sentinel://h1/",
        "redis+sentinel://h1/a/b",
        "redis+sentinel://h1/a?sentinels=h:x",
    ):
        with pytest.raises(InvalidLedgerURL):
            target(bad)
    with pytest.raises(InvalidLedgerURL, match="sentinels"):
        target("redis://h1/0?sentinels=h2:1")


def test_the_ledger_packs_its_commands_as_redis_py_does() -> None:
    """The hot path's own packer must send the bytes redis-py would: every kind of
    command the ledger sends, one at a time and pipelined."""
    from redis._parsers.encoders import Encoder
    from redis.connection import PythonRespSerializer

    plan = commands.plan_for(RedisOptions(wait_replicas=1), (7, 0), cluster=False)
    sent = [
        ("EVALSHA", "ab" * 20, 2, b"{}dl-genesis:ns", b"{}dl:\x00\xff\r\n*$", b"g:e", TOKEN),
        plan.proof_command,
        *commands.FACT_COMMANDS,
        commands.scan_command(0, b"{}dl:*", 1000),
        ("WAIT", 1, 250),
        ("EVAL", "return 1", 0),
    ]
    encoder: Any = Encoder  # redis-py's packer is untyped
    serializer: Any = PythonRespSerializer(6000, encoder("utf-8", "strict", False).encode)
    theirs = b"".join(b"".join(serializer.pack(*c)) for c in sent)
    assert commands.pack(sent) == theirs
    assert commands.pack(sent[:1]) == b"".join(serializer.pack(*sent[0]))
    for odd in (True, 1.5, None, "é"):
        with pytest.raises((TypeError, UnicodeEncodeError)):
            commands.pack([("SET", b"k", odd)])
