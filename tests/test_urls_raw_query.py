"""``LedgerURL.without_query`` keeps the driver's parameters exactly as written."""

from __future__ import annotations

from ledger_core.urls import LedgerURL


def test_kept_parameters_stay_byte_for_byte() -> None:
    url = LedgerURL.parse(
        "postgresql://u:p%2Bw@h:5432/db?options=-c%20a%3Db&table=t&sslmode=require&x=a+b&table2="
    )
    kept = url.without_query("table")
    assert kept == "postgresql://u:p%2Bw@h:5432/db?options=-c%20a%3Db&sslmode=require&x=a+b&table2="


def test_all_removed_leaves_no_query() -> None:
    url = LedgerURL.parse("postgresql://h/db?namespace=n&table=t")
    assert url.without_query("namespace", "table") == "postgresql://h/db"


def test_encoded_key_names_are_matched_decoded() -> None:
    url = LedgerURL.parse("postgresql://h/db?na%6Despace=n&keep=1")
    assert url.without_query("namespace") == "postgresql://h/db?keep=1"
