"""No password ever shows, for any URL a user can type.

Before: ``redis://app:Xy7/kQ9@127.0.0.1:6379/0`` printed the whole URL in "malformed
ledger URL" (``urlsplit`` put half the password in the path, so no ``@`` was seen in the
netloc), and a password with ``@`` leaked its tail through libpq (which splits at the
first ``@``). Passwords here are random printable text with ``/ # ? @ : %`` and unicode,
in URLs of every built-in scheme; no 3+-character piece of one may appear in
``redact_url``, ``str``/``repr`` of the parsed URL, any error out of ``open_ledger``
(its message and every chained cause or context), or the CLI's stderr.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ledger_core import InvalidLedgerURL, LedgerError, LedgerURL, open_ledger, redact_url
from ledger_core.cli import main
from ledger_core.protocol import describe
from ledger_core.urls import scrub, secret_fragments

SCHEMES = ("memory", "sqlite", "redis", "rediss", "unix", "redis+cluster", "postgresql", "postgres")
# Parsed only (no I/O): opening these would look a name up or wait out a server selection.
PARSED_ONLY = ("mongodb", "mongodb+srv", "dynamodb")
SHOWN = 3  # no piece of a password this long or longer may show

printable = st.characters(blacklist_categories=("Cs", "Cc"))
special = st.sampled_from(list("/#?@:%&=;+ [].\\"))
passwords = st.text(st.one_of(printable, special, special), min_size=1, max_size=24)
users = st.text(st.one_of(printable, special), max_size=8)
hosts = st.sampled_from(["127.0.0.1", "localhost", "[::1]", "127.0.0.1:{port}", "localhost:{port}"])
tails = st.sampled_from(["", "/0", "/db", "/db?sslmode=disable", "/0?namespace=n", "?x=1", "#f"])


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


PORT = _closed_port()


DELIMITERS = set("/#?@:%&=;+ [].\\")


def _shadow(password: str) -> str:
    """A password of the same shape (delimiters kept, letters x/X, digits 1): a URL with it
    parses the same way, so every fixed word of the messages shows in both outputs."""
    return "".join(
        c if c in DELIMITERS else "1" if c.isdigit() else "X" if c.isupper() else "x"
        for c in password
    )


def _leaks(password: str, shown: str, url: str, baseline: str = "") -> list[str]:
    """Pieces of ``password`` (3+ chars) that show, and are neither in the URL's other parts
    nor in ``baseline`` (what shows for the shadow password: our fixed text)."""
    head, _, rest = url.partition(f":{password}@")
    public = f"{head}:\x00@{rest}"
    pieces = {password[i : i + SHOWN] for i in range(len(password) - SHOWN + 1)}
    return sorted(p for p in pieces if p in shown and p not in public and p not in baseline)


def _texts(exc: BaseException) -> Iterator[str]:
    """The exception's text and every exception chained to it (cause and context)."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        current = todo.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        yield f"{current} {current.args!r}"
        todo += [current.__cause__, current.__context__]


def _url(scheme: str, user: str, password: str, host: str, tail: str) -> str:
    return f"{scheme}://{user}:{password}@{host.format(port=PORT)}{tail}"


@settings(max_examples=600, deadline=None)
@given(st.sampled_from(SCHEMES + PARSED_ONLY), users, passwords, hosts, tails)
@example("redis", "app", "Xy7/kQ9", "127.0.0.1:6379", "/0")
@example("mongodb", "app", "Qz@Kv/Wx", "127.0.0.1", "/db")
@example("dynamodb", "u", "p@ss/w#rd?x", "localhost", "?region=us-east-1")
@example("postgresql", "u", "Secr@tX9", "127.0.0.1:{port}", "/db")
@example("postgresql", "u", "a#b?c/d@e:f%41g", "localhost", "/db")
@example("redis", "", "p@ss/w?rd#x", "[::1]", "/0")
def test_redact_url_and_parsed_urls_never_show_the_password(
    scheme: str, user: str, password: str, host: str, tail: str
) -> None:
    url = _url(scheme, user, password, host, tail)
    base = _shown_when_parsed(_url(scheme, user, _shadow(password), host, tail))
    assert _leaks(password, _shown_when_parsed(url), url, base) == []


def _shown_when_parsed(url: str) -> str:
    texts = [redact_url(url)]
    try:
        parsed = LedgerURL.parse(url)
    except LedgerError as exc:
        texts += _texts(exc)
    else:
        texts += [str(parsed), repr(parsed), parsed.redacted]
    return "\n".join(texts)


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(st.sampled_from(SCHEMES), users, passwords, hosts, tails)
@example("redis", "app", "Xy7/kQ9", "127.0.0.1:6379", "/0")
@example("postgresql", "u", "Secr@tX9", "127.0.0.1:{port}", "/db")
@example("postgres", "u", "abcd@efghijk", "127.0.0.1:{port}", "/db")
@example("postgresql", "app", "Qz@Kv/Wx", "127.0.0.1:{port}", "/db")
@example("postgresql", "app", "p@ss/w#rd?x", "127.0.0.1:{port}", "/db")
def test_open_ledger_errors_never_show_the_password(
    scheme: str, user: str, password: str, host: str, tail: str
) -> None:
    url = _url(scheme, user, password, host, tail)
    base = _shown_when_opened(scheme, _url(scheme, user, _shadow(password), host, tail))
    assert _leaks(password, _shown_when_opened(scheme, url), url, base) == []


def _shown_when_opened(scheme: str, url: str) -> str:
    try:
        ledger = open_ledger(url, create=False) if scheme != "redis+cluster" else open_ledger(url)
    except LedgerError as exc:
        return "\n".join(_texts(exc))
    return repr(ledger)  # memory:// opens anything


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(st.sampled_from(SCHEMES), users, passwords, hosts, tails, st.booleans())
@example("redis", "app", "Xy7/kQ9", "127.0.0.1:6379", "/0", False)
@example("postgresql", "u", "Secr@tX9", "127.0.0.1:{port}", "/db", True)
def test_cli_stderr_never_shows_the_password(
    capsys: pytest.CaptureFixture[str],
    scheme: str,
    user: str,
    password: str,
    host: str,
    tail: str,
    debug: bool,
) -> None:
    url = _url(scheme, user, password, host, tail)
    flags = ["--debug"] if debug else []
    main([*flags, "is-spent", _url(scheme, user, _shadow(password), host, tail), "req"])
    base = "".join(capsys.readouterr())
    main([*flags, "is-spent", url, "req"])
    out, err = capsys.readouterr()
    assert _leaks(password, err + out, url, base) == []


def test_sqlite_absolute_paths_and_plain_urls_show_as_written(tmp_path: Path) -> None:
    for url in ("sqlite:////abs.db", "sqlite:////data/me@home.db", f"sqlite:///{tmp_path}/l.db"):
        assert redact_url(url) == url
    assert redact_url("redis://u@h:1/0") == "redis://u@h:1/0"  # a user is not a secret


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://app:Xy7/kQ9@127.0.0.1:6379/0", "redis://app:***@127.0.0.1:6379/0"),
        ("postgresql://u:Secr@tX9@h/db", "postgresql://u:***@h/db"),
        (
            "postgresql://h/db?sslmode=require&password=a#b;c&x=1&token=t",
            "postgresql://h/db?sslmode=require&password=***&x=1&token=***",
        ),
        ("postgresql://h/db?pass%77ord=zz", "postgresql://h/db?***"),
        ("host=h password=x y", "host=h password=***"),  # not a URL at all
        ("app:pw@host", "app:***@host"),  # no "//": user and password can't be told apart
        (" redis://u:pw@h", "***@h"),
    ],
)
def test_redaction_takes_the_widest_reading(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_malformed_url_errors_chain_nothing() -> None:
    with pytest.raises(LedgerError) as caught:
        LedgerURL.parse("redis://app:Xy7/kQ9@127.0.0.1:6379/0")
    assert "Xy7" not in str(caught.value)
    assert caught.value.__cause__ is None
    assert caught.value.__context__ is None


AMBIGUOUS = [
    "postgresql://app:Qz@Kv/Wx@127.0.0.1:{port}/db",  # libpq read host 'Kv'
    "postgresql://app:p@ss/w#rd?x@127.0.0.1:{port}/db",
    "postgresql://app:p@ss?wxyz@127.0.0.1:{port}/db",
    "redis://app:pw?x@127.0.0.1:{port}/0",
    "redis://app:a%zz@127.0.0.1:{port}/0",
    "mongodb://app:Qz@Kv/Wx@127.0.0.1:{port}/db",
    "rediss://u:a@b@127.0.0.1:{port}/0",
]


@pytest.mark.parametrize("url", AMBIGUOUS)
def test_an_ambiguous_userinfo_is_refused_before_any_io(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    url = url.format(port=PORT)
    with pytest.raises(InvalidLedgerURL, match="percent-encode the password") as caught:
        open_ledger(url)
    password = url.partition("://")[2].rpartition("@")[0].partition(":")[2]
    shown = "\n".join(_texts(caught.value))
    assert password not in shown
    assert not any(piece in shown for piece in ("Kv", "Wx", "ss/", "wxyz", "zz"))
    assert main(["is-spent", url, "req"]) == 2
    assert "percent-encode the password" in capsys.readouterr().err


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://u:pw@127.0.0.1:1/db?application_name=a@b",  # "@" in a query value
        "sqlite:////data/me@home.db",
        "unix://u:pw@/tmp/redis.sock",
        "dynamodb://table?region=us-east-1&endpoint_url=http://127.0.0.1:8000",
        "mongodb://u:p%40ss@h1,h2/db?replicaSet=rs",
    ],
)
def test_an_unambiguous_url_still_parses(url: str) -> None:
    assert LedgerURL.parse(url).raw == url


def test_scrubbing_replaces_the_whole_secret_never_a_letter_of_the_message() -> None:
    url = "postgresql://app:pass@h/db"
    text = "missing key/value separator: pass, password, 'pass'"
    assert scrub(text, secret_fragments(url)) == "missing key/value separator: ***, password, '***'"
    assert scrub("separator p", secret_fragments("redis://u:p@h/0")) == "separator p"


def test_a_dynamodb_endpoint_with_credentials_never_shows_them() -> None:
    url = f"dynamodb://table?region=us-east-1&endpoint_url=http://u:Secr3tPass@127.0.0.1:{PORT}"
    with pytest.raises(LedgerError) as caught:
        open_ledger(url)  # refused before any I/O: an endpoint takes no credentials
    assert not any("Secr3tPass" in text for text in _texts(caught.value))
    assert "Secr3tPass" not in redact_url(url)


# Every other place a secret can be given (the userinfo above is one): option values in
# the query, keyword options, a userinfo inside an option's own address. Each is written
# as a user must (percent-encoded in a query) and opened against nothing listening.
# (MongoDB's and DynamoDB's URLs are parsed only, above: opening waits out a selection.)
SLOTS: dict[str, tuple[str, str | None]] = {
    "sentinel master userinfo": ("redis+sentinel://u:{raw}@127.0.0.1:{port}/m", None),
    "sentinel_password in the URL": (
        "redis+sentinel://127.0.0.1:{port}/m?sentinel_password={quoted}",
        None,
    ),
    "sentinel_password keyword": ("redis+sentinel://127.0.0.1:{port}/m", "sentinel_password"),
    "userinfo in sentinels=": (
        "redis+sentinel://127.0.0.1:{port}/m?sentinels=:{quoted}@127.0.0.1:{port}",
        None,
    ),
    "postgres password=": ("postgresql://u@127.0.0.1:{port}/db?password={quoted}", None),
    "postgres sslpassword=": ("postgresql://u@127.0.0.1:{port}/db?sslpassword={quoted}", None),
}


def _placed(slot: str, password: str) -> tuple[str, dict[str, str], str]:
    """The URL and keyword options that carry ``password`` in ``slot``, and the text of
    the password as written there."""
    template, keyword = SLOTS[slot]
    quoted = quote(password, safe="")
    url = template.format(port=PORT, raw=password, quoted=quoted)
    written = password if "{raw}" in template else quoted
    return url, ({keyword: password} if keyword else {}), written


def _shown_anywhere(url: str, options: dict[str, str], capsys: pytest.CaptureFixture[str]) -> str:
    """Every text a user may see: the open's error (and its chain) or the ledger's repr
    and description, and the CLI's output (a URL only: the CLI takes no keywords)."""
    texts = [redact_url(url)]
    try:
        ledger = open_ledger(url, create=False, **options)
    except LedgerError as exc:
        texts += _texts(exc)
    else:  # pragma: no cover - nothing listens on PORT
        texts += [repr(ledger), repr(describe(ledger))]
    if not options:
        for command in ("store-id", "doctor"):
            main([command, url])
        texts += capsys.readouterr()
    return "\n".join(texts)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(st.sampled_from(sorted(SLOTS)), passwords)
@example("userinfo in sentinels=", "Sntl-S3cret-pw")
@example("sentinel_password keyword", "p@ss/w#rd?x")
@example("userinfo in sentinels=", "000,")  # the "," once split it before the "@" check
def test_no_option_that_carries_a_secret_shows_it(
    capsys: pytest.CaptureFixture[str], slot: str, password: str
) -> None:
    url, options, written = _placed(slot, password)
    shadow_url, shadow_options, _ = _placed(slot, _shadow(password))
    base = _shown_anywhere(shadow_url, shadow_options, capsys)
    shown = _shown_anywhere(url, options, capsys)
    assert _written_leaks({password, written}, shown, url.replace(written, "\x00"), base) == []


# Parsed only (opening waits out a server selection or an AWS lookup): the query options
# of the stores above that can carry a secret, as written in a URL.
PARSED_SLOTS = (
    "mongodb://u@127.0.0.1:{port}/db?tlsCertificateKeyFilePassword={quoted}",
    "mongodb+srv://u@cluster.example/db?authSource=admin&password={quoted}",
    "dynamodb://table?region=us-east-1&endpoint_url=http://u:{quoted}@127.0.0.1:{port}",
)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(PARSED_SLOTS), passwords)
def test_parsed_only_options_that_carry_a_secret_never_show_it(
    template: str, password: str
) -> None:
    quoted = quote(password, safe="")
    url = template.format(port=PORT, quoted=quoted)
    shadow = template.format(port=PORT, quoted=quote(_shadow(password), safe=""))
    shown, base = _shown_when_parsed(url), _shown_when_parsed(shadow)
    assert _written_leaks({password, quoted}, shown, url.replace(quoted, "\x00"), base) == []


def _written_leaks(secrets: set[str], shown: str, public: str, base: str) -> list[str]:
    """Pieces (3+ chars) of any form of the secret that show, and are neither in the
    URL's other parts (``public``) nor in what the shadow secret shows (``base``)."""
    pieces = {s[i : i + SHOWN] for s in secrets for i in range(len(s) - SHOWN + 1)}
    return sorted(p for p in pieces if p in shown and p not in public and p not in base)
