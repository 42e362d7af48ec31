"""LangGraph approvals whose tool call runs at most once, however many resumes race.

``gate.mint`` is its own node, *before* the one that interrupts: LangGraph re-runs an
interrupted node from the top on resume, so a mint beside ``interrupt()`` would re-read
the current store and defeat H5. It writes the pending record (plain JSON) into the
state, or marks it ``"decided"`` when its request was already spent (a reused thread
and tool call id): the tool node's ``gate.decide(state, config)`` (``await
gate.adecide``) then refuses it without asking; else it interrupts with the question
and, on resume, spends the answer. ``gate.resume(graph, answer, config)`` resumes pinned
to the pause, so a resume that lost raises ``NotThisResume`` rather than returning the
winner's final state. Request id:
``langgraph/<thread_id>/<request_key(state)>``. With an :class:`AttemptSecret` in
``config["configurable"][SECRET_KEY]`` the same attempt, retried, re-enters; every other
resume is refused. ``close_thread`` closes a timed-out pause with a proof. See
``docs/hosts.md`` for a whole graph.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END
from langgraph.types import Command, interrupt

from ledger_agents import (
    Action,
    ApprovalNotRecorded,
    Decision,
    InvalidAnswer,
    NotThisResume,
    acheck_all,
    adecide,
    changed_reason,
    check_all,
    checked,
    decide,
    decided_before,
    decided_in,
    derive_request_id,
    require_bool,
)
from ledger_core import (
    Closure,
    PendingRequest,
    Resolution,
    ResolveVerdict,
    already_decided,
    already_decided_async,
    close_pause,
    close_pause_async,
    is_async_ledger,
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
    "ThreadNotPaused",
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


class MintNode(Protocol):
    """A node's shape as LangGraph types it: ``(state, config)``."""

    def __call__(self, state: Any, config: RunnableConfig) -> Any: ...


ASK_AGAIN = "ask-again"  # the outcome gate.ask_again() leaves for the mint node
PAST_THE_PAUSE = (
    "Not run by this resume: another resume already answered this approval (approved or"
    " denied), and the thread has moved past the pause."
)


class ThreadNotPaused(NotThisResume):
    """``gate.resume`` found the thread no longer paused on this approval, and its
    request spent: another resume (or the host's close) decided it; nothing ran here."""

    def __init__(self, decision: Decision) -> None:
        super().__init__(decision, "")


def _pinned(snapshot: Any, config: RunnableConfig, request_id: str) -> RunnableConfig | None:
    """``config`` pinned to the checkpoint paused on ``request_id``, or ``None``."""
    for pause in snapshot.interrupts:
        value = pause.value
        asked = value.get("ledger_request") if isinstance(value, Mapping) else None
        if isinstance(asked, Mapping) and asked.get("request_id") == request_id:
            pinned = dict(_configurable(config))
            pinned["checkpoint_id"] = snapshot.config["configurable"]["checkpoint_id"]
            return {**config, "configurable": pinned}
    return None


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

    @property
    def mint(self) -> MintNode:
        """The mint node (async for an async ledger): remember the store this request is
        asked under, and whether it was decided already (one ``is_spent``)."""
        return self._amint if is_async_ledger(self.ledger) else self._mint

    def _minted(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        pending = mint(self.ledger, self.request_id(state, config))
        # The outcome is written too (None), and the record says so: its absence from the
        # state then proves the key is undeclared (a record minted before this check
        # carries no "outcome_key", and its thread is not refused for it).
        record: dict[str, Any] = {**pending.to_dict(), "outcome_key": OUTCOME_KEY}
        prior = state.get(self.state_key) if isinstance(state, Mapping) else None
        outcome = state.get(OUTCOME_KEY) if isinstance(state, Mapping) else None
        if isinstance(outcome, Mapping) and outcome.get("action") == ASK_AGAIN:
            asked = prior.get("store_id") if isinstance(prior, Mapping) else None
            record["reason"] = changed_reason(asked, pending.store_id)  # H5, as elsewhere
        return record

    def _mint(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        record = check_all(self.ledger, {"": self._minted(state, config)})[""]
        return {self.state_key: record, OUTCOME_KEY: None}

    async def _amint(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        record = (await acheck_all(self.ledger, {"": self._minted(state, config)}))[""]
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
        if isinstance(record, Mapping) and "reason" in record:
            payload["reason"] = record["reason"]  # H5: why the person is asked again
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
        ``ApprovalNotRecorded`` when the ledger failed before recording (resume again).
        A request the mint node found decided is refused without a question."""
        secret = _secret(config)  # every check before the interrupt and the spend
        before = decided_in(self._record(state))
        if before is not None:
            return before
        pending, approved = self._ask(state, question)
        return checked(decide(self.ledger, pending, approved, attempt_secret=secret))

    async def adecide(
        self, state: Any, config: RunnableConfig, *, question: object = None
    ) -> Decision:
        """The same in an async graph (async or sync ledger)."""
        secret = _secret(config)
        before = decided_in(self._record(state))
        if before is not None:
            return before
        pending, approved = self._ask(state, question)
        return checked(await adecide(self.ledger, pending, approved, attempt_secret=secret))

    def ask_again(self) -> Command[str]:
        """H5 (``ledger-changed``): back to the mint node, which mints under the current
        store; the tool node then interrupts and asks the person again, with a
        ``reason`` naming both stores. (A switch back to the first store later asks
        again there too: once per store.)"""
        return Command(goto=self.mint_node, update={OUTCOME_KEY: {"action": ASK_AGAIN}})

    def _resume_config(
        self, snapshot: Any, answer: object, config: RunnableConfig
    ) -> tuple[RunnableConfig | None, PendingRequest]:
        require_bool(self.approved(answer), ACCEPTED)  # InvalidAnswer: nothing is resumed
        record = snapshot.values.get(self.state_key) if snapshot.values else None
        if record is None:
            raise LookupError("the thread has no pending approval: nothing to resume")
        pending = PendingRequest.from_dict(record)
        return _pinned(snapshot, config, pending.request_id), pending

    def resume(self, graph: Any, answer: object, config: RunnableConfig) -> Any:
        """Resume this gate's pause with the person's answer and return the graph's output.

        The answer is read first (``InvalidAnswer``, nothing resumed: ``None`` included,
        which LangGraph itself cannot carry); the resume is pinned to the paused
        checkpoint, so a resume that lost re-runs the gate and raises
        :class:`NotThisResume` instead of returning the winner's final state, and one
        that finds the thread past the pause raises :class:`ThreadNotPaused`."""
        snapshot = graph.get_state(config)
        pinned, pending = self._resume_config(snapshot, answer, config)
        if pinned is None:
            _not_paused(already_decided(self.ledger, pending))
        return graph.invoke(Command(resume=answer), pinned)

    async def aresume(self, graph: Any, answer: object, config: RunnableConfig) -> Any:
        """:meth:`resume` for an async graph (async or sync ledger)."""
        snapshot = await graph.aget_state(config)
        pinned, pending = self._resume_config(snapshot, answer, config)
        if pinned is None:
            _not_paused(await already_decided_async(self.ledger, pending))
        return await graph.ainvoke(Command(resume=answer), pinned)

    def end(self, decision: Decision, *, goto: str = END) -> Command[str]:
        """A refusal: record the verdict and message in the state, then go to ``goto``."""
        outcome = {
            "action": decision.action.value,
            "message": decision.message,
            "resolution": decision.resolution.to_dict(),
        }
        return Command(goto=goto, update={OUTCOME_KEY: outcome})


def _not_paused(found: Resolution | None) -> None:
    """The thread is past its pause: who decided it, or a lookup error if nobody did."""
    if found is None:
        raise LookupError(
            "the thread is not paused on this approval and its request is not spent:"
            " nothing to resume"
        )
    message = PAST_THE_PAUSE
    if found.verdict is ResolveVerdict.CLOSED_BY_HOST:
        message = decided_before(found).message
    raise ThreadNotPaused(Decision(Action.REFUSE, message, found))


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
