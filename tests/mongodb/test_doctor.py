"""``decision-ledger doctor`` on a MongoDB ledger: its versions and configuration lines,
each judged by the same refusals as the open."""

from __future__ import annotations

from typing import Any

import pytest

from ledger_core.doctor import FAIL, INFO, PASS
from ledger_core.protocol import Durability
from ledger_mongodb.identity import Facts, doctor_checks, ledger_info
from tests.doctor_report import doctor, named
from tests.servers import mongodb as servers


def _url(base: str, extra: str) -> str:
    return base + ("&" if "?" in base else "?") + extra


def test_the_servers_lines_agree_with_its_decision(
    mongo: servers.Found, capsys: pytest.CaptureFixture[str]
) -> None:
    proving = _url(
        mongo.url,
        "collection=doctor_lines" + "".join(f"&{k}={v}" for k, v in mongo.proof_options.items()),
    )
    lines = doctor(proving, capsys, setup=True)
    assert named(lines, "identity")[0].status == "PASS"
    (versions,) = named(lines, "versions")
    assert "pymongo " in versions.detail
    details = [line.detail for line in named(lines, "configuration")]
    assert (
        details[0] == "write concern w: majority, j: true on every write (sent with each command)"
    )
    assert "a plain collection, collation simple, no TTL index" in details
    if mongo.nx:  # without durability=process nx-27017 never proves: its journal line fails
        lines = doctor(_url(mongo.url, "collection=doctor_lines"), capsys)
        failed = [line for line in named(lines, "configuration") if line.status == "FAIL"]
        assert [line.detail[:40] for line in failed] == ["nx-27017 cannot promise that a journaled"]


def _facts(build: dict[str, Any], **collection: Any) -> Facts:
    entry = {"name": "c", "type": "collection", "options": collection, "info": {}}
    status = {"storageEngine": {"name": "wiredTiger", "persistent": True}}
    return Facts({"isWritablePrimary": True}, build, status, None, entry, [])


@pytest.mark.parametrize(
    ("build", "status"),
    [
        ({"version": "3.6.8"}, FAIL),
        ({"version": "5.0.3"}, PASS),
        ({"version": "7.0.2"}, PASS),
        ({}, INFO),
    ],
)
def test_the_version_is_judged_and_a_missing_one_is_said(
    build: dict[str, Any], status: str
) -> None:
    facts = _facts(build)
    info = ledger_info(facts, location="l", namespace="n", genesis=b"g", database="d")
    checks = doctor_checks(facts, info, Durability.MACHINE, "4.13.0")
    assert checks[0].status == status
    if status == INFO:
        assert "the server reports no version" in checks[0].detail


def test_every_refusal_fails_a_line_of_its_own() -> None:
    facts = _facts({"version": "7.0.2"}, capped=True, collation={"locale": "en", "strength": 2})
    info = ledger_info(facts, location="l", namespace="n", genesis=b"g", database="d")
    assert info.store_id is None
    checks = doctor_checks(facts, info, Durability.MACHINE, "4.13.0")
    failed = [c.detail for c in checks if c.status == FAIL]
    assert failed == [reason for _, reason in facts.refusals()]
    assert len(failed) == 2
