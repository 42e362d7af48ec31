"""C8 ids: any 1..MAX_ID_BYTES-byte Unicode string, compared exactly; anything else refused.

The limits come from ``ledger_core.ids``: the suite keeps no copy of them."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from ledger_core.errors import InvalidRequestId
from ledger_core.ids import MAX_ID_BYTES

from ..axes import Axes
from ..declare import declare
from ..harness import Handle, Ledgers
from .common import assert_linearizable, expect_bool, require_is_spent

NFC = unicodedata.normalize("NFC", "caf\u00e9")
NFD = unicodedata.normalize("NFD", "caf\u00e9")

# Pairs a careless store of another kind confuses: compatibility and width folding (a
# collation, NFKC), kana folding, text decoded in another encoding, real collisions of
# short hashes used as keys (CRC-32; FNV-1 and FNV-1a, 32-bit), long shared prefixes (a
# key column that truncates at 128, 255 or 512).
FOLDED_PAIRS: tuple[tuple[str, str], ...] = (
    ("ABC123", "\uff21\uff22\uff23\uff11\uff12\uff13"),  # full-width
    ("\u30ab", "\uff76"),  # katakana KA / half-width KA
    ("\u304d", "\u30ad"),  # hiragana KI / katakana KI
    ("fi", "\ufb01"),  # NFKC: the fi ligature
    ("x2", "x\u00b2"),  # NFKC: superscript two
    ("\u00e9", "\u00c3\u00a9"),  # e-acute / its UTF-8 bytes read as Latin-1
    ("plumless", "buckeroo"),  # CRC-32
    ("req-956a9f617d", "req-9f360143da"),  # CRC-32
    ("req-eeafa002fb", "req-80a1809915"),  # FNV-1, 32-bit
    ("costarring", "liquid"),  # FNV-1a, 32-bit
    ("p" * 128 + "a", "p" * 128 + "b"),
    ("q" * 255 + "a", "q" * 255 + "b"),
    ("r" * 512 + "a", "r" * 512 + "b"),
)

# Each pair differs only in a way a careless store erases (case, space, form, length).
EDGE_IDS = (
    *(request_id for pair in FOLDED_PAIRS for request_id in pair),
    "a",
    "A",
    "z",
    "\x00",
    ":",
    "a:b",
    "a\x00b",
    "a\x00",
    "\x00a",
    "key",
    "Key",
    "KEY",
    "stra\u00dfe",
    "STRASSE",
    "strasse",
    "\u0130",
    "i\u0307",
    "a ",
    " a",
    "a  ",
    "a\t",
    "a\n",
    NFC,
    NFD,
    "\u212b",
    "\u00c5",  # Angstrom sign vs A-ring (NFC-equal)
    "\U0001f600",
    "\U0001f600\U0001f600",
    "\ufeffa",
    "x" * 64 + "a",
    "x" * 64 + "b",
    "y" * (MAX_ID_BYTES - 1) + "a",
    "y" * (MAX_ID_BYTES - 1) + "b",
    "x" * MAX_ID_BYTES,
    "\u00e9" * (MAX_ID_BYTES // 2),
    "\U0001f600" * (MAX_ID_BYTES // 4),
    "\u00e9" * (MAX_ID_BYTES // 2 - 1) + "ab",
    "'; DROP TABLE decision_ledger; --",
    "*",
    "?",
    "[a-z]",
    "${id}",
    "%s",
    "{}",
    "\\",
    '"',
    "$where",
    "../..",
    "\r\n",
)

# (id spent, look-alike read): each pair differs only in a way a careless READ erases
# (an is_spent that strips, folds or normalizes while spend is exact).
LOOKALIKE_PAIRS: tuple[tuple[str, str], ...] = (
    ("a", "a "),
    ("a", " a"),
    ("a", "a\t"),
    ("a", "a\n"),
    ("a", "a\x00"),
    ("a", "\x00a"),
    ("a", "A"),
    ("key", "KEY"),
    ("stra\u00dfe", "strasse"),
    (NFC, NFD),
    ("\u00c5", "\u212b"),
    ("a", "\ufeffa"),
    ("order-1", "order-10"),  # prefix
    ("order-10", "order-1"),  # suffix dropped
    ("order-1", "xorder-1"),
    ("x" * 64 + "a", "x" * 64 + "b"),
    ("y" * (MAX_ID_BYTES - 1) + "a", "y" * (MAX_ID_BYTES - 1) + "b"),
    *FOLDED_PAIRS,
)

INVALID_IDS: tuple[tuple[object, str | None], ...] = (
    # (invalid id, the valid id a sloppy store might record in its place)
    (b"abc", "abc"),
    (123, "123"),
    (None, "None"),
    ("", None),
    ("w" * (MAX_ID_BYTES + 1), "w" * MAX_ID_BYTES),
    ("\u00e9" * (MAX_ID_BYTES // 2 + 1), "\u00e9" * (MAX_ID_BYTES // 2)),
    ("\ud800", "\ufffd"),
    ("a\udfffb", "a\ufffdb"),
    ("a\udfffb", "a?b"),
    ("a\udfffb", "ab"),
)

C8 = declare("C8", f"ids: 1-{MAX_ID_BYTES} UTF-8 bytes, compared exactly; invalid ids refused")


def _assert_invalid(handle: Handle, method: str, value: object) -> None:
    with pytest.raises(InvalidRequestId):
        handle.call(method, value)


_valid_text = st.text(
    alphabet=st.characters(exclude_categories=["Cs"]), min_size=1, max_size=24
).filter(lambda s: len(s.encode("utf-8")) <= MAX_ID_BYTES)
_ids = st.one_of(_valid_text, st.sampled_from(EDGE_IDS))


class C8Ids:
    @C8()
    def test_C8_edge_ids_are_distinct(self, ledgers: Ledgers) -> None:
        label = ledgers.label()
        handle = ledgers.open(label)
        assert len(set(EDGE_IDS)) == len(EDGE_IDS)
        for request_id in EDGE_IDS:
            assert expect_bool(handle.spend(request_id), "spend") is True, (
                f"spend({request_id[:80]!r}) returned False: an earlier, different id "
                "was taken for it (case, space, normalization or truncation)"
            )
        other = ledgers.open(label)
        for request_id in EDGE_IDS:  # round-trip through a fresh instance
            if other.has_is_spent:
                assert other.is_spent(request_id) is True, f"{request_id[:80]!r} not read back"
            assert other.spend(request_id) is False, f"{request_id[:80]!r} spent twice"
        assert_linearizable(ledgers, "C8")

    @C8()
    def test_C8_lookalike_reads(self, ledgers: Ledgers) -> None:
        """Reads of a look-alike BEFORE and AFTER its twin is spent, each pair on a store
        of its own (spending every id first would hide an is_spent that strips or folds)."""
        problems: list[str] = []
        for number, (spent, read) in enumerate(LOOKALIKE_PAIRS):
            handle = ledgers.open(ledgers.label(f"pair{number}"))
            require_is_spent(handle)
            steps: list[tuple[str, str, str, bool]] = [
                ("is_spent", read, "nothing spent yet", False),
                ("spend", spent, "nothing spent yet", True),
                ("is_spent", read, f"only {shown(spent)} spent", False),
                ("is_spent", spent, f"{shown(spent)} spent", True),
                ("spend", read, f"only {shown(spent)} spent", True),
                ("is_spent", read, f"{shown(read)} spent", True),
            ]
            for method, request_id, state, expected in steps:
                call = handle.spend if method == "spend" else handle.is_spent
                answer = expect_bool(call(request_id), method)
                if answer is not expected:
                    problems.append(
                        f"{method}({shown(request_id)}) answered {answer} with {state}; "
                        f"expected {expected} (id spent {shown(spent)}, id read "
                        f"{shown(read)}: ids compare exactly)"
                    )
                    break
        assert not problems, f"{len(problems)} look-alike pair(s) confused:\n  " + (
            "\n  ".join(problems)
        )
        assert_linearizable(ledgers, "C8")

    @C8()
    def test_C8_invalid_ids_refused(self, ledgers: Ledgers) -> None:
        handle = ledgers.open(ledgers.label())
        for value, _ in INVALID_IDS:
            _assert_invalid(handle, "spend", value)
            if handle.has_is_spent:
                _assert_invalid(handle, "is_spent", value)
        for value, lookalike in INVALID_IDS:
            if lookalike is None:
                continue
            assert handle.spend(lookalike) is True, (
                f"refusing {value!r} recorded {lookalike[:40]!r} (the spend of it returned False)"
            )

    @C8()
    def test_C8_generated_ids(self, ledgers: Ledgers) -> None:
        handle = ledgers.open(ledgers.label())
        spent: set[str] = set()

        @seed(Axes(ledgers.runtime.seed).part_seed("C8:generated"))  # the run's seed replays
        @settings(
            max_examples=ledgers.profile.examples,
            deadline=None,
            database=None,
            suppress_health_check=[HealthCheck.too_slow],
        )
        @given(st.lists(_ids, min_size=1, max_size=6))
        def exact_ids(batch: list[str]) -> None:
            for request_id in batch:
                expected = request_id not in spent
                if handle.has_is_spent:
                    assert handle.is_spent(request_id) is (not expected), (
                        f"is_spent({request_id!r}) disagrees with the ids spent so far"
                    )
                assert handle.spend(request_id) is expected, (
                    f"spend({request_id!r}) returned the wrong answer: ids compare exactly"
                )
                spent.add(request_id)

        exact_ids()
        assert_linearizable(ledgers, "C8")


def shown(request_id: object) -> str:
    """A long id as its length and tail, so the two sides of a pair stay readable."""
    if not isinstance(request_id, str) or len(request_id) <= 24:
        return repr(request_id)
    return f"{request_id[:8]!r}...{request_id[-4:]!r} ({len(request_id)} chars)"
