"""Every error out of a Redis ledger is a LedgerError, and none shows a secret
(issue 8, items 6, 11, 12)."""

from __future__ import annotations

from urllib.parse import quote

import pytest
import redis

from ledger_core import open_ledger
from ledger_core.cli import main
from ledger_core.errors import LedgerError, UnsafeStoreConfig
from ledger_core.opening import OpenRequest
from ledger_redis import RedisLedger, commands, identity
from ledger_redis.options import RedisOptions
from tests.flavors import Flavored
from tests.servers import redis as servers
from tests.servers.common import free_port

FLAVORS = ["sync", "async"]


def _genesis_key(namespace: str) -> bytes:
    return commands.genesis_key(namespace)


# ---------------------------------------------------------------- item 6: WRONGTYPE


@pytest.mark.parametrize("flavor", FLAVORS)
def test_genesis_of_the_wrong_type_at_open(flavor: str, redis_url: str, namespace: str) -> None:
    client = redis.Redis.from_url(redis_url)
    client.hset(_genesis_key(namespace), "f", "v")
    with pytest.raises(UnsafeStoreConfig, match="wrong type"):
        Flavored(flavor, redis_url, namespace=namespace)
    client.close()


@pytest.mark.parametrize("flavor", FLAVORS)
def test_wrong_types_after_open(flavor: str, redis_url: str, namespace: str) -> None:
    client = redis.Redis.from_url(redis_url)
    with Flavored(flavor, redis_url, namespace=namespace) as ledger:
        assert ledger.spend("ok") is True
        client.delete(commands.record_key(namespace, b"hashed"))
        client.hset(commands.record_key(namespace, b"hashed"), "f", "v")
        with pytest.raises(UnsafeStoreConfig, match="wrong type"):
            ledger.spend("hashed")
        client.delete(_genesis_key(namespace))
        client.hset(_genesis_key(namespace), "f", "v")
        with pytest.raises(UnsafeStoreConfig):
            ledger.spend("other")
        with pytest.raises(UnsafeStoreConfig):
            ledger.is_spent("ok")
    client.close()


def test_cli_never_reads_a_wrong_type_as_not_spent(
    redis_url: str, namespace: str, capsys: pytest.CaptureFixture[str]
) -> None:
    client = redis.Redis.from_url(redis_url)
    client.hset(_genesis_key(namespace), "f", "v")
    client.close()
    code = main(["is-spent", f"{redis_url}?namespace={quote(namespace)}", "r1"])
    assert code not in (0, 1)
    assert "Traceback" not in capsys.readouterr().err


def _free_url(path: str = "/0") -> str:
    return f"redis://127.0.0.1:{free_port()}{path}"


BAD_URLS = [
    "redis://127.0.0.1:{port}/not-a-db",
    "redis://127.0.0.1:{port}/0?db=x",
    "redis://127.0.0.1:{port}/0?max_connections=0",
    "redis://127.0.0.1:{port}/0?max_connections=many",
    "redis://bad..host:5/0",
    "redis://127.0.0.1:{port}/0?ssl_cert_reqs=bogus",
    "rediss://127.0.0.1:{port}/0?ssl_cert_reqs=bogus",
    "rediss://127.0.0.1:{port}/0?ssl_ca_certs=/nonexistent/ca.pem",
    "unix:///nonexistent/redis.sock",
    "redis+cluster://127.0.0.1:{free}",
    "redis+cluster://bad..host:5",
    "redis+cluster://127.0.0.1:{free}?ssl_cert_reqs=bogus",
]


@pytest.mark.parametrize("flavor", FLAVORS)
@pytest.mark.parametrize("template", BAD_URLS)
def test_bad_url_parts_are_ledger_errors(
    flavor: str, template: str, local_plain: servers.RedisServer
) -> None:
    url = template.format(port=local_plain.port, free=free_port())
    with pytest.raises(LedgerError):
        Flavored(flavor, url + ("&" if "?" in url else "?") + "connect_timeout=1")


def test_from_client_of_the_wrong_type_is_a_ledger_error() -> None:
    with pytest.raises(LedgerError):
        RedisLedger.from_client(object())


# ---------------------------------------------------------------- item 11: ACL without INFO

PASSWORD = "n0-1nfo-Pa55"


@pytest.fixture(scope="module")
def no_info_user(local_plain: servers.RedisServer) -> str:
    admin = redis.Redis(port=local_plain.port)
    admin.acl_setuser(
        "noinfo",
        enabled=True,
        passwords=[f"+{PASSWORD}"],
        keys=["*"],
        commands=["+@all", "-info", "-config"],
    )
    admin.close()
    return f"redis://noinfo:{PASSWORD}@127.0.0.1:{local_plain.port}/0"


def test_unknown_version_is_unknown_not_zero() -> None:
    facts = identity.facts_from_replies("n", RuntimeError("NOPERM"), [], [])
    assert facts.version is None
    assert identity.server_version([facts]) is None
    opts = RedisOptions(wait_aof=True, trust_config=True)
    plan = commands.plan_for(opts, None, cluster=False)
    assert plan.probe_waitaof  # decided by asking the server, not by a made-up 0
    with pytest.raises(UnsafeStoreConfig, match=r"7\.2"):
        commands.plan_for(opts, (7, 0, 15), cluster=False)


@pytest.mark.parametrize("flavor", FLAVORS)
def test_acl_without_info_decides_wait_aof_by_asking(
    flavor: str, no_info_user: str, namespace: str
) -> None:
    with Flavored(flavor, no_info_user, namespace=namespace, trust_config="true") as ledger:
        assert ledger.store_id is not None  # asserted by trust_config
        assert ledger.spend("acl") is True
    with pytest.raises(LedgerError) as caught:
        Flavored(flavor, no_info_user, namespace=namespace, trust_config="true", wait_aof="true")
    text = str(caught.value)
    assert "runs 0" not in text
    assert "WAITAOF" in text


# ---------------------------------------------------------------- item 12: secrets

NASTY = ["Xy7/kQ9pass", "Se#cr3tZZ", "Qu?ery9Wk", "Secr@tX9q", "co:lon5Kq", "a/b#c?d@e:f7Zx"]


def _all_text(exc: BaseException) -> str:
    """Every message, repr and chained cause/context of ``exc``."""
    seen: list[str] = []
    current: BaseException | None = exc
    while current is not None and len(seen) < 40:
        seen.append(f"{current!s} {current!r} {current.args!r}")
        current = current.__cause__ or current.__context__
    return "\n".join(seen)


def _fragments(password: str) -> list[str]:
    """The password and every piece of it a split at ``/ # ? @ :`` would show."""
    pieces = [password]
    for sep in "/#?@:":
        pieces.extend(p for p in password.split(sep) if len(p) >= 3)
    return pieces


@pytest.fixture(scope="module")
def nasty_users(local_plain: servers.RedisServer) -> servers.RedisServer:
    admin = redis.Redis(port=local_plain.port)
    for i, password in enumerate(NASTY):
        admin.acl_setuser(
            f"nasty{i}", enabled=True, passwords=[f"+{password}"], keys=["*"], commands=["+@all"]
        )
    admin.close()
    return local_plain


@pytest.mark.parametrize("flavor", FLAVORS)
@pytest.mark.parametrize("index", range(len(NASTY)))
def test_passwords_with_url_characters_never_show(
    flavor: str, index: int, nasty_users: servers.RedisServer, namespace: str
) -> None:
    password = NASTY[index]
    where = f"127.0.0.1:{nasty_users.port}/0"
    good = f"redis://nasty{index}:{quote(password, safe='')}@{where}"
    with Flavored(flavor, good, namespace=namespace) as ledger:
        assert ledger.spend("secret") is True
        shown = f"{ledger.ledger!r} {ledger.describe()!r} {ledger.describe().location}"
        for fragment in _fragments(password):
            assert fragment not in shown
    for wrong in (
        f"redis://nasty{index}:{quote('W' + password, safe='')}@{where}",
        f"redis+cluster://nasty{index}:{quote(password, safe='')}@127.0.0.1:{free_port()}",
    ):
        with pytest.raises(LedgerError) as caught:
            Flavored(flavor, wrong, namespace=namespace, connect_timeout="1")
        text = _all_text(caught.value)
        for fragment in _fragments(password):
            assert fragment not in text, fragment


@pytest.mark.parametrize("flavor", FLAVORS)
def test_raw_at_and_colon_in_a_password(
    flavor: str, nasty_users: servers.RedisServer, namespace: str
) -> None:
    """An unencoded ``@`` is refused before any I/O (parsers disagree where the userinfo
    ends); encoded, and with a raw ``:``, it opens and shows nothing."""
    index = NASTY.index("Secr@tX9q")
    raw = f"redis://nasty{index}:Secr@tX9q@127.0.0.1:{nasty_users.port}/0"
    with pytest.raises(LedgerError, match="percent-encode the password") as refused:
        Flavored(flavor, raw, namespace=namespace)
    assert "Secr" not in _all_text(refused.value)
    url = f"redis://nasty{index}:Secr%40tX9q@127.0.0.1:{nasty_users.port}/0"
    with Flavored(flavor, url, namespace=namespace) as ledger:
        assert ledger.spend("raw-at") is True
        shown = f"{ledger.ledger!r} {ledger.describe()!r}"
        assert "Secr" not in shown
        assert "tX9q" not in shown
    wrong = f"redis://nasty{index}:Secr%40tX9qW@127.0.0.1:{nasty_users.port}/0"
    with pytest.raises(LedgerError) as caught:
        Flavored(flavor, wrong, namespace=namespace)
    text = _all_text(caught.value)
    assert "Secr" not in text
    assert "tX9q" not in text


def test_driver_rejections_never_quote_the_url() -> None:
    url = f"redis://app:{quote('Xy7/kQ9', safe='')}@127.0.0.1:{free_port()}/not-a-db"
    with pytest.raises(LedgerError) as caught:
        open_ledger(url)
    assert "Xy7" not in _all_text(caught.value)
    assert "kQ9" not in _all_text(caught.value)


@pytest.mark.parametrize(
    "raw",
    [
        "redis://app:Xy7/kQ9zz@127.0.0.1:6379/0",
        "redis://app:Se#cr3tZZ@127.0.0.1:6379/0",
        "redis://app:Qu?ery9Wk@127.0.0.1:6379/0",
        "redis://app:a/b#c?d@e:f7Zx@127.0.0.1:6379/0",
        "redis+cluster://app:Xy7/kQ9zz@127.0.0.1:7000",
        "unix://app:Xy7/kQ9zz@/tmp/redis.sock",
    ],
)
def test_the_backend_never_shows_a_raw_password(raw: str) -> None:
    """Whatever the core's parser makes of a raw ``/ # ?`` in a password, the Redis
    backend builds no message from the pieces that may hold it."""
    from urllib.parse import urlsplit

    from ledger_core.urls import LedgerURL
    from ledger_redis import BACKEND, CLUSTER_BACKEND
    from ledger_redis.errors import location as _location

    parts = urlsplit(raw)
    url = LedgerURL(raw=raw, parts=parts, scheme=parts.scheme, redacted="<redacted>", query={})
    password = raw.split("app:", 1)[1].rsplit("@", 1)[0]
    pieces = _fragments(password)
    shown = _location(url)
    assert not any(piece in shown for piece in pieces), shown
    backend = CLUSTER_BACKEND if raw.startswith("redis+cluster") else BACKEND
    with pytest.raises(LedgerError) as caught:
        backend.open(OpenRequest(url, "n", {"connect_timeout": "0.5"}))
    text = _all_text(caught.value)
    assert not any(piece in text for piece in pieces), text
