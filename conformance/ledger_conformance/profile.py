"""How hard the suite pushes: ``quick`` meets the issue's minimums, ``thorough`` scales up."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Profile:
    name: str
    ids: int  # ids contended by threads, and by asyncio tasks
    threads: int  # threads released together on each id
    tasks: int  # asyncio tasks released together on each id
    processes: int  # OS processes released together on each id
    process_ids: int
    fork_processes: int  # children forked from a parent that opened and used the ledger
    fork_ids: int  # ids every forked child spends, each child in its own shuffled order
    fork_bound: float  # seconds the forked children may take before they count as hung
    mixed_ids: int  # ids contended by sync and async instances at once
    # seconds between C2's first spends and its re-read (an expiring store fails)
    permanence_wait: float
    # seconds from the LAST of C2's first spends to their re-read at the run's end: a TTL
    # shorter than this fails every run of the profile; a longer one passes every run
    expiry_wait: float
    fault_ids: int  # fresh and already-spent ids tried under each fault
    watchdog: float  # seconds an op may hang in a fault before the suite heals the network
    settle: float  # bound on how long an op may take once the network is healed
    examples: int  # hypothesis examples for C8
    local_fault_hold: float  # seconds a local fault (a locked file) lasts
    volume_ids: int  # distinct ids C2 volume spends and reads back (a size cap must show)
    volume_workers: int  # threads those calls go out on
    axes_wide: bool  # every member of every generated family (quick: a sample of each)
    race_ids: int  # ids raced by every kind of caller at once (threads, forks, spawns)
    model_examples: int = 8  # M1: random operation sequences run against the model
    model_steps: int = 12  # M1: operations per sequence, at most
    model_hook_examples: int = 2  # M1: sequences with a restart (or a forget) in them
    new_stores: int = 2  # C6: brand-new stores each opened by several processes at once


PROFILES = {
    "quick": Profile(
        name="quick",
        ids=100,
        threads=64,
        tasks=256,
        processes=4,
        process_ids=25,
        fork_processes=6,
        fork_ids=100,
        fork_bound=60.0,
        mixed_ids=50,
        permanence_wait=5.0,
        expiry_wait=5.0,
        fault_ids=4,
        watchdog=2.0,
        settle=30.0,
        examples=60,
        local_fault_hold=5.0,
        volume_ids=10_000,
        volume_workers=4,
        axes_wide=False,
        race_ids=16,
    ),
    "thorough": Profile(
        name="thorough",
        ids=300,
        threads=96,
        tasks=512,
        processes=8,
        process_ids=100,
        fork_processes=12,
        fork_ids=300,
        fork_bound=120.0,
        mixed_ids=200,
        permanence_wait=20.0,
        expiry_wait=180.0,
        fault_ids=16,
        watchdog=4.0,
        settle=60.0,
        examples=400,
        local_fault_hold=8.0,
        volume_ids=100_000,
        volume_workers=8,
        axes_wide=True,
        race_ids=64,
        model_examples=40,
        model_steps=30,
        model_hook_examples=8,
        new_stores=10,
    ),
}


def get_profile(name: str) -> Profile:
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(
            f"unknown profile {name!r} (expected one of: {', '.join(PROFILES)})"
        ) from None
