"""LangGraph approvals whose tool call runs at most once, however many resumes race.

``gate.mint`` is its own node, *before* the one that interrupts: LangGraph re-runs an
interrupted node from the top on resume, so a mint beside ``interrupt()`` would re-read
the current store and defeat H5. It writes the pending record (plain JSON) into the
state; the tool node calls ``gate.decide(state, config)`` (``await gate.adecide``),
which interrupts with the question and, on resume, spends the answer. Request id:
``langgraph/<thread_id>/<request_key(state)>``. With an :class:`AttemptSecret` in
``config["configurable"][SECRET_KEY]`` the same attempt, retried, re-enters; every other
resume is refused. ``close_thread`` closes a timed-out pause with a proof. See
``docs/hosts.md`` for a whole graph.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END
from langgraph.types import Command, interrupt

from ledger_agents import (
    Action,
    ApprovalNotRecorded,
    Decision,
    InvalidAnswer,
    NotThisResume,
    adecide,
    checked,
    decide,
    derive_request_id,
    require_bool,
)
from ledger_core import (
    Closure,
    PendingRequest,
    close_pause,
    close_pause_async,
    mint,
)

__all__ = [
    "OUTCOME_KEY",
    "SECRET_KEY",
    "STATE_KEY",
    "Action",
    "ApprovalNotRecorded",
    "AttemptSecret",
    "Decision",
    "InvalidAnswer",
    "LedgerGate",
    "NotThisResume",
    "aclose_thread",
    "close_thread",
]

SECRET_KEY = "ledger_attempt_secret"
STATE_KEY = "ledger_pending"
OUTCOME_KEY = "ledger_outcome"


class AttemptSecret:
    """A resume attempt's secret, as ``config["configurable"][SECRET_KEY]``: an object, as
    LangGraph copies every str or number there into each checkpoint's metadata (so into
    the checkpointer's store); its repr hides it."""

    __slots__ = ("_value",)

    def __init__(self, value: str | bytes) -> None:
        self._value = value

    def reveal(self) -> str | bytes:
        return self._value

    def __repr__(self) -> str:
        return "AttemptSecret(***)"


def _secret(config: RunnableConfig) -> str | bytes | None:
    value = _configurable(config).get(SECRET_KEY)
    if value is None:
        return None
    if not isinstance(value, AttemptSecret):
        raise TypeError(
            f"config['configurable'][{SECRET_KEY!r}] must be an AttemptSecret: LangGraph "
            "writes plain configurable values into every checkpoint's metadata"
        )
    return value.reveal()


ACCEPTED = 'Command(resume=True or False) or Command(resume={"approved": True or False})'


def read_answer(answer: object) -> bool:
    """The default reading of a resume value: ``True``/``False``, or a mapping whose
    ``"approved"`` is ``True``/``False``; anything else is :class:`InvalidAnswer`."""
    if isinstance(answer, Mapping):
        if "approved" not in answer:
            raise InvalidAnswer(
                f'a resume mapping needs an "approved" key ({ACCEPTED}); nothing was spent'
            )
        answer = answer["approved"]
    return require_bool(answer, ACCEPTED)


def _configurable(config: RunnableConfig) -> Mapping[str, Any]:
    return config.get("configurable") or {}


class LedgerGate:
    """One approval point in a graph: its mint node, and the decision in the tool node."""

    def __init__(
        self,
        ledger: object,
        *,
        request_key: Callable[[Any], str],
        mint_node: str = "mint_approval",
        state_key: str = STATE_KEY,
        approved: Callable[[object], bool] = read_answer,
    ) -> None:
        self.ledger = ledger
        self.request_key = request_key
        self.mint_node = mint_node
        self.state_key = state_key
        self.approved = approved  # resume value -> bool; raise InvalidAnswer to ask again

    def request_id(self, state: Any, config: RunnableConfig) -> str:
        thread_id = _configurable(config).get("thread_id")
        if not isinstance(thread_id, str) or not thread_id:
            raise ValueError("an approval needs config['configurable']['thread_id']")
        return derive_request_id("langgraph", thread_id, self.request_key(state))

    def mint(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        """The mint node: remember the store this request is asked under (no I/O)."""
        pending = mint(self.ledger, self.request_id(state, config))
        # The outcome is written too (None), and the record says so: its absence from the
        # state then proves the key is undeclared (a record minted before this check
        # carries no "outcome_key", and its thread is not refused for it).
        record = {**pending.to_dict(), "outcome_key": OUTCOME_KEY}
        return {self.state_key: record, OUTCOME_KEY: None}

    def _record(self, state: Any) -> object:
        record = state.get(self.state_key) if isinstance(state, Mapping) else None
        missing = self.state_key if record is None else None
        if isinstance(record, Mapping) and record.get("outcome_key") not in (None, *state):
            missing = OUTCOME_KEY
        if missing is not None:
            raise LookupError(
                f"the graph's state has no {missing!r}: declare `{self.state_key}: dict[str,"
                f" Any]` and `{OUTCOME_KEY}: dict[str, Any] | None` in its state schema"
                " (LangGraph drops undeclared keys) and run gate.mint as its own node"
                " before this one"
            )
        return record

    def _ask(self, state: Any, question: object) -> tuple[PendingRequest, bool]:
        """Interrupt until the answer reads as a bool: an invalid one is asked again with
        the error in the payload (a raise would pin it as the resume value), unspent."""
        record = self._record(state)
        pending = PendingRequest.from_dict(record)
        payload: dict[str, object] = {"question": question, "ledger_request": record}
        while True:
            answer = interrupt(payload)
            try:
                return pending, require_bool(self.approved(answer), ACCEPTED)
            except InvalidAnswer as exc:
                payload = {**payload, "invalid_answer": str(exc)}

    def decide(self, state: Any, config: RunnableConfig, *, question: object = None) -> Decision:
        """Interrupt with ``question``; on resume, spend the answer (sync ledger): ``RUN``,
        ``ASK_AGAIN`` or ``REFUSE`` (end the thread with :meth:`end`); raises
        :class:`NotThisResume` when another resume holds the approval, and
        ``ApprovalNotRecorded`` when the ledger failed before recording (resume again)."""
        secret = _secret(config)  # every check before the interrupt and the spend
        pending, approved = self._ask(state, question)
        return checked(decide(self.ledger, pending, approved, attempt_secret=secret))

    async def adecide(
        self, state: Any, config: RunnableConfig, *, question: object = None
    ) -> Decision:
        """The same in an async graph (async or sync ledger)."""
        secret = _secret(config)
        pending, approved = self._ask(state, question)
        return checked(await adecide(self.ledger, pending, approved, attempt_secret=secret))

    def ask_again(self) -> Command[str]:
        """H5 (``ledger-changed``): back to the mint node, which mints under the current
        store; the tool node then interrupts and asks the person again. (A switch back
        to the first store later asks again there too: once per store.)"""
        return Command(goto=self.mint_node)

    def end(self, decision: Decision, *, goto: str = END) -> Command[str]:
        """A refusal: record the verdict and message in the state, then go to ``goto``."""
        outcome = {
            "action": decision.action.value,
            "message": decision.message,
            "resolution": decision.resolution.to_dict(),
        }
        return Command(goto=goto, update={OUTCOME_KEY: outcome})


def _pending_of(values: Mapping[str, Any], state_key: str) -> PendingRequest:
    if state_key not in values:
        raise LookupError(f"the thread's state has no {state_key!r}: nothing was minted")
    return PendingRequest.from_dict(values[state_key])


def close_thread(
    ledger: object, graph: Any, config: RunnableConfig, *, state_key: str = STATE_KEY
) -> Closure:
    """A pause timed out: close the thread's pending approval, with a proof where the
    ledger can give one (H3, H4). A resume that arrives later is told the host closed it."""
    return close_pause(ledger, _pending_of(graph.get_state(config).values, state_key))


async def aclose_thread(
    ledger: object, graph: Any, config: RunnableConfig, *, state_key: str = STATE_KEY
) -> Closure:
    state = await graph.aget_state(config)
    return await close_pause_async(ledger, _pending_of(state.values, state_key))
