"""The meta-test's attribution runs ("only its clause catches it"): the quick profile
with smaller samples where a sample is all that grows with the profile, every clause
still run. Loaded with ``-p tests.zoo.sampled``.

Such a run passes a mutant through every other clause; it takes the whole suite minus
one clause, 40-odd times. Two tests are most of each run's time and scale only with a
count: C2 volume (10,000 ids spent and read back, which only the size-capped mutants
need, and their runs leave it out) and C1's asyncio tasks (256 tasks on each of 100
ids). Here they spend 2,000 ids and race 25 ids; the contention per id (threads, tasks,
processes) and every other number stay the quick profile's. The runs that show a mutant
IS caught keep the quick profile as it ships.
"""

from __future__ import annotations

import dataclasses

import pytest

from ledger_conformance import profile

SAMPLE = {"volume_ids": 2_000, "ids": 25}


def pytest_configure(config: pytest.Config) -> None:
    quick = profile.PROFILES["quick"]
    profile.PROFILES["quick"] = dataclasses.replace(quick, **SAMPLE)  # type: ignore[arg-type]
