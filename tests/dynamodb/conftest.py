"""The DynamoDB backend's servers: dynalite and DynamoDB Local, each started once per
session on first use; a test runs on both unless its module narrows it
(``dynamodb_target = tools.on_emulators(DYNALITE)``)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.dynamodb import tools
from tests.servers import dynamodb as servers

TABLE = "decision-ledger-test"


@pytest.fixture(autouse=True)
def _emulator_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test sees the same AWS environment, whatever ran before it and whatever the
    developer's shell holds: dummy keys an emulator accepts, no profile, no config
    files, no instance metadata. With ``LEDGER_TEST_DYNAMODB_URL`` (real AWS) the
    standard chain is left alone."""
    if os.environ.get(servers.URL_ENV):
        return
    for name in ("AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", servers.LOCAL_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", servers.LOCAL_KEY)
    monkeypatch.setenv("AWS_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", os.devnull)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@pytest.fixture(scope="session")
def dynamodb_pool() -> Iterator[servers.Pool]:
    pool = servers.Pool(TABLE)
    yield pool
    pool.close()


dynamodb_target = tools.on_emulators(*servers.EMULATORS)


@pytest.fixture
def dynamodb_url(dynamodb_target: servers.Target) -> str:
    return dynamodb_target.url


@pytest.fixture
def namespace(request: pytest.FixtureRequest) -> str:
    """A namespace of its own for each test, so tests never see each other's ids."""
    return f"t-{tools.RUN}-{request.node.name}"[:200]


@pytest.fixture
def own_table(dynamodb_url: str, request: pytest.FixtureRequest) -> Iterator[str]:
    """A URL on a table of this test's own, deleted afterwards."""
    with tools.table_of_its_own(dynamodb_url, request.node.name, "t") as url:
        yield tools.with_query(url)
