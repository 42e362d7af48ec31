"""Many ids at once (``decision-ledger spend-many`` / ``is-spent-many``): read and
validate every id before any I/O, answer them in batches through the ledger's batch
call where it has one (``spend_many`` / ``is_spent_many``), and keep what is known.

Nothing is guessed: an id whose call raised is ``failed`` (a spend's outcome is then
unknown: it may be spent), never "not spent"; after a failure nothing more is sent and
the ids left are ``not-tried``.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from .errors import InvalidRequestId
from .ids import validate_request_id

BATCH = 1000  # ids per batch call: each backend's own trip size for spend_many

SPENT, ALREADY, NOT_SPENT, FAILED, NOT_TRIED = (
    "spent",
    "already-spent",
    "not-spent",
    "failed",
    "not-tried",
)
Method = Literal["spend", "is_spent"]


class WrongAnswer(Exception):
    """A ledger answered something that is not one bool per id: unknown (CLI exit 4)."""


def parse_ids(text: str, *, json_lines: bool) -> list[str]:
    """The ids of ``text``, in order, each validated (``InvalidRequestId`` names the line).

    Plain: one id per line, exactly as written up to its ``\\n`` (a ``\\r`` before it is
    dropped); an empty line is skipped. JSON lines: each non-blank line is one JSON string
    (``"req-1"``), for ids with a newline, a tab or edge whitespace.
    """
    ids: list[str] = []
    for number, line in enumerate(text.split("\n"), 1):
        line = line.removesuffix("\r")
        if not (line.strip() if json_lines else line):
            continue
        request_id: object = line
        if json_lines:
            try:
                request_id = json.loads(line)
            except ValueError:
                request_id = None
            if not isinstance(request_id, str):
                raise InvalidRequestId(f'line {number}: not one JSON string (e.g. "req-1")')
        try:
            validate_request_id(request_id)
        except InvalidRequestId as exc:
            raise InvalidRequestId(f"line {number}: {exc}") from None
        ids.append(str(request_id))
    return ids


def decode(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidRequestId(f"the input is not UTF-8 (byte {exc.start})") from None


@dataclass
class Tally:
    """What is known of each id (in input order, each id once) and, when the run
    stopped early, why (``error``: the exception a call raised)."""

    method: Method
    results: dict[str, str] = field(default_factory=dict)
    counts: Counter[str] = field(default_factory=Counter)
    error: BaseException | None = None
    started: float = field(default_factory=time.monotonic)

    def add(self, results: list[tuple[str, str]]) -> None:
        self.results.update(results)
        self.counts.update(result for _, result in results)

    def summary(self, repeated: int) -> str:
        c = self.counts
        if self.method == "spend":
            text = f"spent here {c[SPENT]:,}, already spent {c[ALREADY]:,}"
        else:
            text = f"spent {c[SPENT]:,}, not spent {c[NOT_SPENT]:,}"
        text += f", failed {c[FAILED]:,}"
        if c[FAILED] and self.method == "spend":
            text += " (outcome unknown: each may be spent)"
        if c[NOT_TRIED]:
            text += f", not tried {c[NOT_TRIED]:,}"
        if repeated:
            text += f" ({repeated:,} repeated lines answered once)"
        seconds = time.monotonic() - self.started
        return f"{text}; {len(self.results):,} ids in {seconds:.1f} s"


def answer_all(
    ledger: object,
    method: Method,
    ids: Sequence[str],
    on_batch: Callable[[list[tuple[str, str]], Tally], None],
) -> Tally:
    """Each id of ``ids`` (distinct) answered, batch by batch; ``on_batch`` is told each
    batch's results as they come. Stops at the first call that raises (recorded in
    ``error``; ``KeyboardInterrupt`` too), the rest ``not-tried``."""
    tally = Tally(method)
    yes, no = SPENT, ALREADY if method == "spend" else NOT_SPENT
    many = getattr(ledger, f"{method}_many", None)
    one = getattr(ledger, method)
    for start in range(0, len(ids), BATCH):
        batch = ids[start : start + BATCH]
        answered: list[bool] = []
        tried = len(batch)  # the ids a call was made for
        try:
            if callable(many):
                answered = _bools(many(batch), len(batch), f"{method}_many")
            else:  # one call per id: each answer kept even if a later one raises
                for request_id in batch:
                    tried = len(answered) + 1
                    answered += _bools([one(request_id)], 1, method)
        except BaseException as exc:  # KeyboardInterrupt too: what is known is said
            tally.error = exc
        results = [(i, yes if a else no) for i, a in zip(batch, answered, strict=False)]
        results += [(i, FAILED) for i in batch[len(answered) : tried]]
        if tally.error is not None:
            results += [(i, NOT_TRIED) for i in ids[start + tried :]]
        tally.add(results)
        on_batch(results, tally)
        if tally.error is not None:
            break
    return tally


def _bools(answers: object, count: int, what: str) -> list[bool]:
    found = list(answers) if isinstance(answers, list | tuple) else None
    if found is None or len(found) != count or any(type(a) is not bool for a in found):
        raise WrongAnswer(f"{what} answered {answers!r:.80}, not {count} bool(s)")
    return found
