"""The fault schedule: when the proxy turns which toxic on, and when the server restarts
or the store fails over.

Deterministic for a seed (a failing campaign re-runs the same faults); the last part of a
run is always calm, so every call finishes and the final read sees a healed network.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from ..faults import Toxic

# Every toxic a campaign injects, in the order they are cycled through.
FAULTS: tuple[Toxic, ...] = (
    Toxic.DROP_REPLIES,
    Toxic.RESET,
    Toxic.LATENCY,
    Toxic.RESET_AFTER_REQUEST,
    Toxic.BLACKHOLE,
    Toxic.PARTIAL_WRITE,
    Toxic.REFUSE,
)
CALM_TAIL = 0.15  # the share of the run kept fault-free at the end
MIN_TAIL = 1.0  # ... and at least this many seconds
LONGEST_PHASE = 1.5  # seconds: a fault phase (and a calm one) is never longer
SHORTEST_PHASE = 0.05


@dataclass(frozen=True)
class Event:
    """At ``at`` seconds from the start: switch the proxy to ``toxic`` (``latency`` for
    LATENCY), restart the server (``restart``) or fail the store over (``failover``)."""

    at: float
    toxic: Toxic | None = None
    latency: float = 0.0
    restart: bool = False
    failover: bool = False

    def describe(self) -> str:
        if self.restart:
            return "restart"
        if self.failover:
            return "failover"
        assert self.toxic is not None
        if self.toxic is Toxic.LATENCY:
            return f"latency {self.latency * 1000:.0f} ms"
        return str(self.toxic.value).replace("_", " ")


def build(
    duration: float, *, seed: int, faults: bool, restarts: int, failovers: int = 0
) -> list[Event]:
    """The events of one campaign, in time order (the last toxic event is always PASS)."""
    rng = random.Random(seed)
    active = max(0.0, duration - max(MIN_TAIL, duration * CALM_TAIL))
    events: list[Event] = []
    if faults and active > 0:
        # Room for every kind twice (fault + calm) in short runs, never longer phases.
        unit = min(LONGEST_PHASE, max(SHORTEST_PHASE, active / (2 * len(FAULTS))))
        at, turn = unit * rng.uniform(0.5, 1.0), 0
        while at < active:
            toxic = FAULTS[turn % len(FAULTS)]
            latency = round(rng.uniform(0.02, 0.25), 3) if toxic is Toxic.LATENCY else 0.0
            events.append(Event(at, toxic, latency))
            at += unit * rng.uniform(0.5, 1.5)
            events.append(Event(min(at, active), Toxic.PASS))
            at += unit * rng.uniform(0.5, 1.5)
            turn += 1
    for n in range(restarts):
        events.append(Event(active * (n + 1) / (restarts + 1), restart=True))
    for n in range(failovers):  # halfway between restarts when both are scheduled
        events.append(Event(active * (n + 0.5) / (failovers + 0.5), failover=True))
    events.sort(key=lambda e: e.at)
    return events
