"""A batch run in the engine (SPEC 25): its turn submitted, the run stored waiting, continued.

**Submitting.** A run with ``RunConfig(batch=True)`` has its client wrapped in ``BatchClient``:
the model call builds its request as always, then submits it to the provider's batch API
(``custom_id`` ``<run id>_<turn>_<attempt>``) and raises ``Waiting``, a ``Paused``: the loop
stops there as it does for a pause, and finalize's waiting case (``waiting_record``) commits the
transcript so far and keeps on the run what continuing needs (``run.waiting``, and in
``run.paused_turn`` the turn, the messages saved, the budget and options). The run returns; no
task, thread or process is kept. Within ``start_many`` or ``poll`` (``COLLECTOR`` set) the
requests of all runs of the pass wait for each other and go as one batch per client and model.

**Continuing** (``reopen_waiting``, from ``continue_run`` when the last run waits): the
session's lease is taken, the stored run read again (a run another poller continued is not
waiting any more: ``InvalidInput``), and the state rebuilt from the record alone, at the
waiting turn. The poller has put the batch result in the journal as that turn's reply
(``t<turn>/reply``) while holding the lease, so the journal's ``ReplayClient`` answers the
model call with it and the journaled tools never run twice: a poller killed mid-apply leaves
the run waiting with its reply journaled, and the next one finishes it as ``continue_run``
would. A failed request reaches the run as an order (``ORDERS``): raise this error, or submit
the turn again as attempt ``n``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from agentloop.batching import BatchWait
from agentloop.cancel import CancelToken
from agentloop.engine.state import Paused
from agentloop.errors import AgentLoopError, ConfigurationError, InvalidInput
from agentloop.model import ModelClient, ModelRequest, ModelResponse, StreamEvent, WrappedClient

if TYPE_CHECKING:
    from agentloop.engine.conversation import Conversation
    from agentloop.engine.state import RunState
    from agentloop.run import Run

__all__ = [
    "COLLECTOR",
    "ORDERS",
    "BatchClient",
    "Collector",
    "Waiting",
    "reopen_waiting",
    "waiting_record",
]

ORDERS: ContextVar[dict[str, AgentLoopError | int] | None] = ContextVar(
    "agentloop_batch_orders", default=None
)
"""Per run id: the error its failed request stands for, or the attempt to submit again."""


class Waiting(Paused):
    """The run's model turn was submitted to a provider batch (``RunState.waiting``)."""


class Collector:
    """One pass's requests (``start_many``, ``poll``): one batch per client and model.

    ``expected`` runs are driven together; each either submits a request (``add``) or ends
    without one (``done``). When none is still on its way, the requests go, grouped.
    """

    def __init__(self, expected: int) -> None:
        self.outstanding = expected
        self.items: list[tuple[Any, str, ModelRequest, asyncio.Future[BatchWait]]] = []

    async def add(self, client: Any, custom_id: str, request: ModelRequest) -> BatchWait:
        """Queue one request; its ``BatchWait`` once the pass's batches are submitted."""
        future: asyncio.Future[BatchWait] = asyncio.get_running_loop().create_future()
        self.items.append((client, custom_id, request, future))
        self.outstanding -= 1
        if self.outstanding <= 0:
            await self._flush()
        return await future

    async def done(self) -> None:
        """A run of the pass ended without submitting."""
        self.outstanding -= 1
        if self.outstanding <= 0 and self.items:
            await self._flush()

    async def _flush(self) -> None:
        from agentloop.batch._wire import submit

        items, self.items = self.items, []
        groups: dict[tuple[int, str], list[Any]] = {}
        for item in items:
            groups.setdefault((id(item[0]), item[2].model or item[0].model), []).append(item)
        for group in groups.values():
            try:
                sent = await submit(group[0][0], [(c, r) for _, c, r, _ in group])
            except BaseException as error:
                for *_, future in group:
                    future.set_exception(error)
                continue
            for _, custom_id, _, future in group:
                wait = BatchWait(sent.provider, sent.batch_id, custom_id, sent.submitted_at)
                future.set_result(wait)


COLLECTOR: ContextVar[Collector | None] = ContextVar("agentloop_batch_collector", default=None)


class BatchClient(WrappedClient):
    """The client of a batch run: each model call is submitted to the provider's batch API."""

    def __init__(self, inner: ModelClient, state: RunState, recorder: object) -> None:
        """Wrap ``inner`` for the run of ``state``; ``ConfigurationError`` without a store."""
        if recorder is None:
            raise ConfigurationError(
                "a batch run (RunConfig(batch=True)) waits in the store: give the agent one, "
                "Agent(..., store=SQLiteStore(path))"
            )
        super().__init__(inner)
        self._state = state

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Submit ``request`` and raise ``Waiting`` (or raise the error a failed one stands for)."""
        from agentloop.batch._wire import batch_client, submit

        state = self._state
        orders = ORDERS.get()
        order = orders.pop(state.run.id, 0) if orders is not None else 0
        if isinstance(order, AgentLoopError):
            raise order
        client = batch_client(self.inner)
        custom_id = f"{state.run.id}_{state.turn_index}_{order}"
        collector = COLLECTOR.get()
        if collector is not None:
            state.waiting = await collector.add(client, custom_id, request)
        else:
            sent = await submit(client, [(custom_id, request)])
            state.waiting = BatchWait(sent.provider, sent.batch_id, custom_id, sent.submitted_at)
        raise Waiting

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """Batch runs do not stream (refused at construction; kept closed here too)."""
        raise ConfigurationError("a batch run (RunConfig(batch=True)) does not stream")
        yield  # pragma: no cover


def check_agent(agent: Any) -> None:
    """``ConfigurationError`` before anything is sent: a batch agent's client, stream, handoffs.

    Checked at construction for the agent and every agent it hands off to (SPEC 26).
    """
    from agentloop.batch._wire import batch_client

    seen: set[int] = set()
    todo = [agent]
    while todo:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if current.config.stream:
            raise ConfigurationError(
                "RunConfig(batch=True) with stream=True: a batch turn's reply arrives whole "
                "(set stream=False)"
            )
        batch_client(current.client)
        todo.extend(getattr(h, "agent", None) for h in current._handoffs if hasattr(h, "agent"))


def waiting_record(session: Conversation[Any], state: RunState) -> None:
    """Finalize's waiting case: the transcript so far committed, what continuing needs kept."""
    from agentloop.engine.pause import _options_record

    run = state.run
    run.waiting = state.waiting
    limits = session.safety.limits
    run.paused_turn = {
        "turns": len(run.turns),
        "turn": state.turn_index,
        "saved": len(state.audit),
        "budget": limits.budget.snapshot() if limits.budget_on else None,
        "options": _options_record(session, state),
        **({"agent_system": state.system} if run.last_agent else {}),
    }
    session._history.extend(state.transcript[state.base :])


def reopen_waiting(
    session: Conversation[Any], run: Run[Any], deps: Any, cancels: tuple[CancelToken, ...]
) -> RunState:
    """The waiting run's state at its waiting turn, the session's lease held."""
    if session._active is not None:
        raise InvalidInput(f"session {session.id!r} is already running")
    recorder = session._recorder
    if recorder is None or recorder.durable is None or session._journal is None:
        raise InvalidInput("a batch run continues only with a store: Agent(..., store=...)")
    recorder.claim()
    try:
        from agentloop.engine.pause import _adopted

        stored = recorder.durable.load_run(run.id)
        if stored is not None:
            run = _adopted(session, run, stored.run)
        if run.waiting is None:
            raise InvalidInput(f"run {run.id} is not waiting on a batch (continued already)")
        return _state(session, run, deps, cancels)
    except BaseException:
        recorder.release()
        raise


def _state(
    session: Conversation[Any], run: Run[Any], deps: Any, cancels: tuple[CancelToken, ...]
) -> RunState:
    from agentloop.engine.handoffs import resume_in
    from agentloop.engine.pause import _restore_options

    info = run.paused_turn or {}
    try:
        turns, turn, saved = int(info["turns"]), int(info["turn"]), int(info["saved"])
    except (KeyError, TypeError, ValueError) as exc:
        raise InvalidInput(f"run {run.id}: its waiting record is unreadable: {exc}") from exc
    del run.turns[turns:]  # what a poller killed mid-apply saved is done again (journaled)
    del run.messages[saved:]
    session.safety.limits.continue_run(run, info.get("budget"))
    run.waiting, run.paused_turn = None, None
    run.stop_reason, run.output, run.ended_at = None, None, None
    recorder, journal = session._recorder, session._journal
    assert recorder is not None and recorder.durable is not None and journal is not None
    recorder.continuing(run, saved)
    journal.start(run.id, recorder.durable.load_steps(run.id))
    history = session._history
    state = session._new_state(run, list(history), len(history), deps, cancels)
    _restore_options(session, state, info.get("options"))
    if run.last_agent is not None:
        resume_in(session, state, info.get("agent_system"))
    state.audit = list(run.messages)
    state.turn_index = turn
    if state.turn_index and state.settings.tool_choice_once:
        state.release_tool_choice()
    session._bus.turn = turn
    return state
