"""C7 and C8 at the core: validation before I/O and the one collision-free key."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledger_core import InvalidLedgerURL, InvalidRequestId, ledger_key, validate_request_id
from ledger_core.ids import MAX_ID_BYTES, validate_namespace

VALID = [
    "a",
    "x" * MAX_ID_BYTES,
    "é" * (MAX_ID_BYTES // 2),
    "nul\x00inside",
    "colon:and:more",
    "🙂",
    " trailing ",
    unicodedata.normalize("NFC", "é"),
    unicodedata.normalize("NFD", "é"),
]


@pytest.mark.parametrize("request_id", VALID)
def test_valid_ids_round_trip_exactly(request_id: str) -> None:
    assert validate_request_id(request_id).decode("utf-8") == request_id


@pytest.mark.parametrize(
    ("request_id", "message"),
    [
        ("", "empty"),
        ("x" * (MAX_ID_BYTES + 1), "1025 UTF-8 bytes"),
        ("é" * 513, "1026 UTF-8 bytes"),
        ("\ud800", "surrogate"),
        (b"bytes", "must be str, not bytes"),
        (None, "must be str, not NoneType"),
        (42, "must be str, not int"),
    ],
)
def test_invalid_ids_are_refused(request_id: object, message: str) -> None:
    with pytest.raises(InvalidRequestId, match=message):
        validate_request_id(request_id)


def test_invalid_request_id_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        validate_request_id("")


def test_normalization_forms_are_distinct_ids() -> None:
    nfc, nfd = (unicodedata.normalize(f, "é") for f in ("NFC", "NFD"))
    assert validate_request_id(nfc) != validate_request_id(nfd)


def test_naive_concatenations_do_not_collide() -> None:
    assert ledger_key("a", b"b:c") != ledger_key("a:b", b"c")
    assert ledger_key("1", b":a") != ledger_key("1:", b"a")


@given(
    st.text(min_size=1, max_size=20),
    st.binary(min_size=1, max_size=20),
    st.text(min_size=1, max_size=20),
    st.binary(min_size=1, max_size=20),
)
def test_keys_are_injective(ns1: str, id1: bytes, ns2: str, id2: bytes) -> None:
    try:
        validate_namespace(ns1)
        validate_namespace(ns2)
    except InvalidLedgerURL:
        return
    if (ns1, id1) != (ns2, id2):
        assert ledger_key(ns1, id1) != ledger_key(ns2, id2)


@pytest.mark.parametrize("namespace", ["", "x" * 257, "\udc80", 5])
def test_bad_namespaces_are_refused(namespace: object) -> None:
    with pytest.raises(InvalidLedgerURL):
        validate_namespace(namespace)
