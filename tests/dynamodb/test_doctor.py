"""``decision-ledger doctor`` on a DynamoDB ledger: the endpoint, botocore's version and
the table's facts, each judged by the same refusals as the open."""

from __future__ import annotations

import pytest

from ledger_core.doctor import FAIL, PASS
from ledger_dynamodb.identity import TableFacts, doctor_checks, ledger_info
from ledger_dynamodb.options import Settings
from tests.doctor_report import doctor, named


def test_the_tables_lines_agree_with_its_decision(
    dynamodb_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"{dynamodb_url}&namespace=doctor-lines&durability=process"
    lines = doctor(url, capsys, setup=True)
    (versions,) = named(lines, "versions")
    assert versions.detail.startswith("botocore ")
    assert "endpoint: " in versions.detail
    details = [line.detail for line in named(lines, "configuration")]
    assert details[0].endswith("ACTIVE, key 'pk' (binary hash key)")
    emptying = [line for line in named(lines, "identity") if "FIRST" in line.detail]
    assert len(emptying) == 1  # the order C6's "records alone" needs here (issue 37)
    assert "delete its genesis item (g:<namespace>) FIRST" in emptying[0].detail
    if "endpoint_url=" in dynamodb_url:  # an emulator proves only when accepted
        assert "an emulator, accepted with durability=process" in details
        lines = doctor(f"{dynamodb_url}&namespace=doctor-lines", capsys)
        (failed,) = [line for line in named(lines, "configuration") if line.status == "FAIL"]
        assert failed.detail.startswith("endpoint ")
        assert "is not AWS DynamoDB" in failed.detail


def _facts(**kw: object) -> TableFacts:
    base: dict[str, object] = {
        "name": "t",
        "table_id": "id",
        "arn": "arn:aws:dynamodb:eu-west-1:1:table/t",
        "created": "1.0",
        "status": "ACTIVE",
        "key_ok": True,
        "ttl_status": "DISABLED",
        "ttl_attribute": "",
        "replicas": (),
        "multi_region": "EVENTUAL",
    }
    base.update(kw)
    return TableFacts(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize(("botocore", "status"), [("1.33.13", FAIL), ("1.34.0", PASS)])
def test_botocore_below_the_extras_floor_fails(botocore: str, status: str) -> None:
    facts = _facts()
    info = ledger_info(facts, b"g" * 16, Settings(), location="t", endpoint_url=None)
    checks = doctor_checks(facts, info, Settings(), None, botocore)
    assert checks[0].status == status
    assert "endpoint: AWS DynamoDB" in checks[0].detail


def test_ttl_on_a_ledger_attribute_and_a_global_table_fail_their_lines() -> None:
    facts = _facts(ttl_status="ENABLED", ttl_attribute="tok", replicas=("eu-west-1", "us-east-1"))
    info = ledger_info(facts, b"g" * 16, Settings(), location="t", endpoint_url=None)
    assert info.store_id is None
    checks = doctor_checks(facts, info, Settings(), None, "1.35.0")
    failed = [c.detail for c in checks if c.status == FAIL]
    assert len(failed) == 2
    assert failed[0].startswith("Time to Live is on for attribute 'tok'")
    assert failed[1].startswith("a global table")


def test_the_endpoint_is_shown_without_user_info_or_path() -> None:
    """Neither the versions line nor the refusal (the reason store-id shows too) says
    the endpoint's user info, path or query."""
    facts = _facts(server="dynalite")
    endpoint = "http://user:s3cret@127.0.0.1:8000/some/path?token=s3cret"
    info = ledger_info(facts, b"g" * 16, Settings(), location="t", endpoint_url=endpoint)
    checks = doctor_checks(facts, info, Settings(), endpoint, "1.35.0")
    text = " ".join(c.detail + c.fix for c in checks) + (info.reason or "")
    assert "http://127.0.0.1:8000, server dynalite" in text
    assert "s3cret" not in text


def test_doctor_before_setup_vets_the_endpoint_and_creates_nothing(
    own_table: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A table not set up yet: what setup would create, the credentials and the endpoint
    judged as an open judges them (exit 1: the store line fails), and no table made."""
    from ledger_core.cli import main
    from tests.doctor_report import SLACK, parse
    from tests.dynamodb import tools

    emulator = tools.emulator(own_table)
    assert main(["doctor", f"{own_table}&durability=process", *SLACK]) == 1
    lines = parse(capsys.readouterr().out)
    assert lines[0].status == "FAIL"
    assert "does not exist yet" in lines[0].detail
    details = {line.detail: line.status for line in lines}
    assert any("the credentials are accepted" in d and s == "PASS" for d, s in details.items())
    assert any(d.startswith("setup creates table") for d in details)
    assert sum(status == "FAIL" for status in details.values()) == 1  # the store alone
    if emulator:  # without durability=process an emulator never proves: said before setup
        assert main(["doctor", own_table, *SLACK]) == 1
        failed = [line for line in parse(capsys.readouterr().out) if line.status == "FAIL"]
        assert any("is not AWS DynamoDB" in line.detail for line in failed[1:])
    client = tools.admin_client(own_table)
    with pytest.raises(client.exceptions.ResourceNotFoundException):
        client.describe_table(TableName=tools.url_parts(own_table)[0])
    client.close()


@pytest.mark.parametrize("flavor", ["sync", "async"])
def test_preflight_on_a_table_without_the_namespace_reads_its_settings(
    dynamodb_url: str, flavor: str
) -> None:
    """The table exists, the namespace does not: its settings are judged (C9: both
    flavours alike), nothing is written."""
    import asyncio

    from ledger_core import setup_ledger
    from ledger_core.opening import OpenRequest
    from ledger_dynamodb import AsyncDynamoDBLedger, DynamoDBLedger
    from ledger_dynamodb.options import parse
    from tests.dynamodb import tools

    options = tools.ledger_options(dynamodb_url)
    setup_ledger(dynamodb_url, namespace="preflight-other", **options)  # the table exists
    target = parse(OpenRequest.build(dynamodb_url, namespace="never-set-up", **options))
    if flavor == "sync":
        checks = DynamoDBLedger.preflight(target)
    else:
        checks = asyncio.run(AsyncDynamoDBLedger.preflight(target))
    details = [check.detail for check in checks]
    assert checks[0].name == "versions"
    assert any(d.endswith("ACTIVE, key 'pk' (binary hash key)") for d in details)
    assert "setup writes namespace 'never-set-up''s genesis item" in details
    assert all(check.status != FAIL for check in checks), checks
    from ledger_core import open_ledger
    from ledger_core.errors import LedgerUnavailable

    with pytest.raises(LedgerUnavailable, match="does not exist"):  # still not set up
        open_ledger(dynamodb_url, namespace="never-set-up", create="false", **options)
