"""Batch runs (SPEC 25): many runs' model turns through the providers' batch APIs, at their price.

An agent with ``RunConfig(batch=True)`` (and a store) submits each model turn to the OpenAI or
Anthropic batch API; ``run()`` returns at once with ``run.waiting`` (a ``BatchWait``), the run
stored waiting and nothing held. ``start_many`` starts many runs with one batch for all their
first turns. ``poll`` (any process on the same store; ``agentloop batch poll`` at the command
line) continues each waiting run whose result arrived: it takes the result as its model reply,
runs its tools, then finishes, pauses on a pending call (SPEC 17) or submits its next turn (one
batch per client and model per pass).

**At most once.** A result is claimed in the store before it is applied: the poller takes the
session's lease, reads the run again (another poller may have continued it), and journals the
result as the turn's reply before continuing; the tools are journaled as in any stored run. Two
pollers racing apply it once; one killed mid-apply leaves it to the next (the run's stored
status stays ``waiting`` until its continuation records its end, so the next pass finds it).

**Failures.** An errored request is the error its status and body would be synchronously; a
429 is submitted again in the next batch, as is an expired request (``ProviderTimeout``) up to
``max_retries`` times; a cancelled batch is ``Cancelled``, a failed one ``BadRequestError``.
Each hard error ends its run after finalize (its completed turns committed); the poll goes on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import field
from inspect import isawaitable
from typing import TYPE_CHECKING, Any

from agentloop._util.slots import record
from agentloop.batching import BatchWait
from agentloop.errors import (
    AgentLoopError,
    ConfigurationError,
    MemoryBackendError,
    ProviderTimeout,
    RateLimited,
)

if TYPE_CHECKING:
    from agentloop.engine.agent import Agent
    from agentloop.fleet._batch_wire import Outcome
    from agentloop.run import Run, RunInput

__all__ = ["BatchWait", "PollReport", "poll", "start_many"]

MAX_RESUBMITS = 2
"""How many times an expired request is submitted again (the clients' default ``max_retries``)."""


@record
class PollReport:
    """What one ``poll`` pass did, by run id.

    ``continued``: runs that took their result (and finished or submitted their next turn);
    ``waiting``: runs whose result has not arrived; ``paused``: runs that paused on a pending
    call; ``failed``: the hard error that ended each failed run.
    """

    continued: list[str] = field(default_factory=list)
    waiting: list[str] = field(default_factory=list)
    paused: list[str] = field(default_factory=list)
    failed: dict[str, AgentLoopError] = field(default_factory=dict)


def _check(agent: Agent[Any]) -> Any:
    if not agent.config.batch:
        raise ConfigurationError("agentloop.batch needs an agent with RunConfig(batch=True)")
    if agent.store is None:
        raise ConfigurationError("a batch run needs a store: Agent(..., store=SQLiteStore(...))")
    return agent.store


async def start_many(
    agent: Agent[Any], inputs: Sequence[RunInput], *, deps: Any = None
) -> list[Run[Any]]:
    """Start one run per input, each in its own session: one provider batch for all first turns.

    ``deps``: what each run's tools, filters and dynamic toolsets read (``ctx.deps``) when its
    first turn is built; a value, or ``(input) -> deps`` (sync or async) called once per input.
    Give ``poll`` the same: deps are not stored, and the first turn's tools are resolved here.
    Each returned run waits (``run.waiting``), or ended before its first model call: a hard
    error there (an input guardrail, a budget) is that run's ``stop_reason``, never raised, so
    one input's refusal neither stops nor strands the others. An input that is no run input is
    ``InvalidInput`` before anything starts.
    """
    from agentloop.fleet._batch_client import COLLECTOR, Collector
    from agentloop.messages import Message

    _check(agent)
    for value in inputs:
        Message.from_input(value)  # InvalidInput naming what fits, before any run starts
    each = [await _deps_of(deps, value) for value in inputs]  # a factory that fails sends nothing
    collector = Collector(len(inputs))
    token = COLLECTOR.set(collector)
    try:

        async def one(value: RunInput, its: Any) -> Run[Any]:
            session = agent.session()
            try:
                return await session.run(value, deps=its)
            except AgentLoopError:
                if not session.runs:
                    raise
                return session.runs[-1]  # ended before its first model call: stop_reason says
            finally:
                if not session.runs or session.runs[-1].waiting is None:
                    await collector.done()

        starts = (one(v, d) for v, d in zip(inputs, each, strict=True))
        started = await asyncio.gather(*starts, return_exceptions=True)
    finally:
        COLLECTOR.reset(token)
    for outcome in started:  # every other run started (and waits in the store) before this
        if isinstance(outcome, BaseException):
            raise outcome
    return [run for run in started if not isinstance(run, BaseException)]


async def _deps_of(deps: Any, value: Any) -> Any:
    made = deps(value) if callable(deps) else deps
    return await made if isawaitable(made) else made


async def poll(agent: Agent[Any], *, deps: Any = None) -> PollReport:
    """One pass over the store's waiting runs: continue each whose result arrived (SPEC 25).

    ``deps``: a value or ``(run) -> deps``, as for ``continue_run``.
    """
    from agentloop.fleet._batch_client import COLLECTOR, ORDERS, Collector
    from agentloop.fleet._batch_wire import batch_client, fetch

    store = _check(agent)
    client = batch_client(agent.client)
    waiting = [s for s in _waiting_runs(store) if s.finished and s.run.waiting is not None]
    report = PollReport()
    results: dict[str, dict[str, Outcome] | None] = {}
    for stored in waiting:
        batch_id = stored.run.waiting.batch_id
        if batch_id not in results:
            results[batch_id] = await fetch(client, batch_id)
    collector = Collector(len(waiting))
    tokens = COLLECTOR.set(collector), ORDERS.set({})
    try:
        await asyncio.gather(
            *(_apply(agent, s.session_id, s.run, results, deps, report) for s in waiting)
        )
    finally:
        COLLECTOR.reset(tokens[0])
        ORDERS.reset(tokens[1])
    return report


def _waiting_runs(store: Any) -> list[Any]:
    """The store's waiting runs: one query on the status column (schema 3, ``agentloop.store``).

    A store of another make is read whole, as before the column existed.
    """
    from agentloop.store._sql import SQLStore

    if isinstance(store, SQLStore):
        return store.load_runs(status="waiting")
    return list(store.load_runs())


async def _apply(
    agent: Agent[Any],
    session_id: str,
    seen: Run[Any],
    results: dict[str, dict[str, Outcome] | None],
    deps: Any,
    report: PollReport,
) -> None:
    from agentloop.fleet._batch_client import COLLECTOR

    collector = COLLECTOR.get()
    assert collector is not None
    submitted = False
    try:
        kind = await _claimed(agent, session_id, seen, results, deps, report)
        submitted = kind == "submitted"
    finally:
        if not submitted:
            await collector.done()


async def _claimed(
    agent: Agent[Any],
    session_id: str,
    seen: Run[Any],
    results: dict[str, dict[str, Outcome] | None],
    deps: Any,
    report: PollReport,
) -> str:
    """Claim the run's result in the store, then continue the run with it."""
    session = agent.session(session_id)
    recorder = session._recorder
    assert recorder is not None and recorder.durable is not None and seen.waiting is not None
    try:
        recorder.claim()  # one poller applies a result: another live one is told so here
    except MemoryBackendError:
        report.waiting.append(seen.id)  # another poller is applying it now
        return "busy"
    stored = recorder.durable.load_run(seen.id)
    now = stored.run.waiting if stored is not None else None
    if now is None or now.request_id != seen.waiting.request_id:
        recorder.release()  # another poller continued it
        return "gone"
    turn = int((stored.run.paused_turn or {}).get("turn", 0)) if stored is not None else 0
    key = f"t{turn}/reply"
    if key not in recorder.durable.load_steps(seen.id):
        ready = _result(seen, now, results, recorder, key)
        if ready is None:
            recorder.release()
            report.waiting.append(seen.id)
            return "waiting"
    from agentloop.fleet._batch_client import ORDERS

    again = isinstance((ORDERS.get() or {}).get(seen.id), int)
    return await _continue(session, seen.id, deps, report, again)


def _result(
    seen: Run[Any],
    wait: BatchWait,
    results: dict[str, dict[str, Outcome] | None],
    recorder: Any,
    key: str,
) -> bool | None:
    """Journal the result as the turn's reply (or leave an order); None: not arrived yet."""
    from agentloop.fleet._batch_client import ORDERS

    outcomes = results.get(wait.batch_id)
    outcome = None if outcomes is None else outcomes.get(wait.request_id)
    if outcome is None:
        return None
    orders = ORDERS.get()
    assert orders is not None
    if outcome.reply is not None:
        reply = outcome.reply
        recorder.step(
            seen.id,
            key,
            {
                "message": reply.message.to_dict(),
                "usage": reply.usage.to_dict(),
                "model": reply.model,
                "stop_reason": reply.stop_reason,
            },
        )
        return True
    attempt = int(wait.request_id.rsplit("_", 1)[-1])
    again = isinstance(outcome.error, RateLimited) or (
        isinstance(outcome.error, ProviderTimeout) and attempt < MAX_RESUBMITS
    )
    orders[seen.id] = attempt + 1 if again else outcome.error  # type: ignore[assignment]
    return False


async def _continue(session: Any, run_id: str, deps: Any, report: PollReport, again: bool) -> str:
    try:
        run = await session.continue_run(deps=deps)
    except AgentLoopError as error:
        report.failed[run_id] = error
        return "failed"
    if run.waiting is not None:  # its next turn submitted (or this one again: still waiting)
        (report.waiting if again else report.continued).append(run_id)
        return "submitted"
    if run.paused:
        report.paused.append(run_id)
        return "paused"
    report.continued.append(run_id)
    return "continued"
