"""Generated inputs along every axis the clauses vary, one set of generators for all.

A store author's bug hides on the axis a suite holds fixed: ids of one length, stores
named by a counter, callers of one kind, one operation. The clauses draw their ids,
store labels, callers, instances and operations from here instead. Each run draws a
sample of every family from its seed (every family always, its first pair, the one the
family is for, in every run, so a bug that merges that pair shows on any seed); thorough
draws every member.
The seed is printed in the report; ``LEDGER_CONFORMANCE_SEED=N`` replays a run's draws.
"""

from __future__ import annotations

import os
import random
import secrets
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ledger_core.ids import MAX_ID_BYTES

SEED_ENV = "LEDGER_CONFORMANCE_SEED"

# -- ids -----------------------------------------------------------------------------

# Byte lengths of long ids around the limits a key column, an index or a page may have:
# 1024 (the limit) and 1023 are always drawn, the others sampled.
LONG_ALWAYS = (MAX_ID_BYTES, MAX_ID_BYTES - 1)
LONG_LENGTHS = (100, 127, 128, 129, 200, 255, 256, 257, 500, 511, 512, 513, 767, 768, 1000)
# Fillers of 1, 2, 3 and 4 UTF-8 bytes: a limit counted in characters, not bytes, shows.
FILLERS = ("x", "\u00e9", "\u20ac", "\U0001f600")

NFC = unicodedata.normalize("NFC", "caf\u00e9")
NFD = unicodedata.normalize("NFD", "caf\u00e9")

# Look-alike families: ids that differ only in a way a careless store erases (decoding
# an escape, folding case, width or form, trimming, a separator it rewrites). A bug that
# merges one member with another usually merges the whole class.
ID_FAMILIES: dict[str, tuple[str, ...]] = {
    "space-escapes": ("a b", "a%20b", "a+b", "a%2520b", "a\\x20b", "a&#32;b"),
    "letter-escapes": ("A", "%41", "a", "%61", "\\u0041", "&#65;"),
    "percent": ("%", "%25", "%2525", "%%", "%2", "%zz"),
    "case": ("key", "Key", "KEY", "kEY", "stra\u00dfe", "STRASSE", "strasse"),
    "width": ("ABC1", "\uff21\uff22\uff23\uff11", "abc1", "\u30ab", "\uff76"),
    "normalization": (NFC, NFD, "\u00c5", "\u212b", "fi", "\ufb01", "x2", "x\u00b2"),
    "whitespace": ("w", "w ", " w", "w\t", "w\n", "w\r\n", "w\u00a0", "w\u200b", "\ufeffw"),
    "separators": ("s:t", "s_t", "s-t", "s/t", "s.t", "s|t", "st", "s\\t", "s::t", "s\x1ft"),
    "quotes": ("q'r", 'q"r', "q\\'r", "q''r", "q`r", "q\x00r"),
    "url": ("u?v", "u#v", "u&v", "u=v", "u;v", "u,v"),
}

# -- store labels ----------------------------------------------------------------------

# Sibling store labels (namespaces in a URL run) that differ only in punctuation, case,
# a separator or a prefix: an encoding that sanitizes, folds or prefix-matches merges them.
NAME_FAMILIES: dict[str, tuple[str, ...]] = {
    "punctuation": ("b:x", "b_x", "b-x", "b/x", "b.x", "b x", "b|x", "b%3Ax"),
    "case": ("b", "B", "bX", "BX"),
    "prefix": ("p", "px", "p:", "p-x", "px-"),
}

# -- callers ----------------------------------------------------------------------------

# Who calls, in one race: threads of this process on a sync or an async instance, forked
# children (they inherit what the parent imported), freshly spawned interpreters (they
# import it all again: a secret, seed or cache drawn at import starts over).
CALLERS: tuple[tuple[str, str], ...] = tuple(
    (kind, flavor) for kind in ("thread", "fork", "spawn") for flavor in ("sync", "async")
)


@dataclass(frozen=True)
class Axes:
    """The run's draws: deterministic per ``seed``; ``wide`` (thorough) draws more."""

    seed: int
    wide: bool = False

    def rng(self, part: str) -> random.Random:
        """A generator of its own for each part, so parts draw independently of order."""
        return random.Random(self.part_seed(part))

    def part_seed(self, part: str) -> str:
        """The seed of one part's draws (Hypothesis's too: ``hypothesis.seed``), so the
        run's one seed replays its generated sequences as well as its ids."""
        return f"{self.seed}:{part}"

    def long_ids(self, tag: str, part: str) -> list[str]:
        """Ids of 100 to exactly 1024 UTF-8 bytes, unique per ``tag``, in fillers of 1-4
        bytes, and pairs equal but for their last byte (a truncating key merges them)."""
        rng = self.rng(f"long:{part}")
        count = len(LONG_LENGTHS) if self.wide else 4
        lengths = [*LONG_ALWAYS, *rng.sample(LONG_LENGTHS, count)]
        ids = [exact_bytes(f"{tag}-{n}-", n, rng.choice(FILLERS)) for n in lengths]
        for n in (256, 513, MAX_ID_BYTES):  # twins past a 255, 512 or 1023 byte cut
            twin = exact_bytes(f"{tag}-t{n}-", n - 1, "y")
            ids += [twin + "a", twin + "b"]
        return ids

    def families(self, part: str) -> list[tuple[str, ...]]:
        """A sample of every look-alike family (at least 3 members each; all: thorough)."""
        return self._sample(ID_FAMILIES.values(), f"ids:{part}", 3)

    def names(self, part: str) -> list[tuple[str, ...]]:
        """A sample of every sibling-name family (at least 3 members each)."""
        return self._sample(NAME_FAMILIES.values(), f"names:{part}", 3)

    def edge_ids(self, edges: Sequence[str], part: str, count: int = 24) -> list[str]:
        """A sample of C8's edge ids (all of them: thorough)."""
        if self.wide or count >= len(edges):
            return list(edges)
        return self.rng(f"edge:{part}").sample(list(edges), count)

    def _sample(
        self, families: Iterable[tuple[str, ...]], part: str, least: int
    ) -> list[tuple[str, ...]]:
        rng = self.rng(part)
        drawn = []
        for family in families:
            size = len(family) if self.wide else min(len(family), max(least, len(family) // 2))
            # The first two members, the pair each family is for, are always drawn: a bug
            # that merges only that pair is caught in every run, not one run in four.
            drawn.append((*family[:2], *rng.sample(family[2:], size - 2)))
        return drawn


def exact_bytes(head: str, size: int, filler: str) -> str:
    """``head`` padded with ``filler`` (then ASCII) to exactly ``size`` UTF-8 bytes."""
    room = size - len(head.encode("utf-8"))
    if room < 0:
        raise ValueError(f"{head!r} is longer than {size} bytes")
    width = len(filler.encode("utf-8"))
    text = head + filler * (room // width) + "z" * (room % width)
    assert len(text.encode("utf-8")) == size
    return text


def run_seed() -> int:
    """This run's seed: ``LEDGER_CONFORMANCE_SEED`` when set (a run replayed), else new."""
    given = os.environ.get(SEED_ENV, "").strip()
    if given:
        try:
            return int(given)
        except ValueError:
            raise ValueError(f"{SEED_ENV}={given!r}: expected an integer") from None
    return secrets.randbelow(10**9)


def seed_note(axes: Axes) -> str:
    """What a failure says so it reproduces."""
    return replay_note(axes.seed)


def replay_note(seed: int) -> str:
    """The seed and how to run again with it (a failure's message, the report's header)."""
    return f"axes seed {seed} (replay this run's draws with {SEED_ENV}={seed})"


__all__ = [
    "CALLERS",
    "FILLERS",
    "ID_FAMILIES",
    "NAME_FAMILIES",
    "SEED_ENV",
    "Axes",
    "exact_bytes",
    "replay_note",
    "run_seed",
    "seed_note",
]
