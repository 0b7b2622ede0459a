"""A ``TemporalAgent``'s guardrail checks as the activity ``agentloop.<name>.guardrail``.

A check may call its own service (a moderation API): run in the workflow's code, it would run
again on every replay and might answer otherwise, and the workflow would leave its history.
So the workflow asks the activity for each verdict (``Verdicts``, set as the guardrails'
``RECORDER`` while the run's workflow code runs), Temporal records it, and a replay takes the
recorded verdict. The activity finds the guardrail by name in the worker's agent (or in the
handoff receiver the payload names), calls its check with a context like the engine's, and
returns the verdict with the usage of the check's own model calls (``ctx.client``), which the
workflow then counts in the run's usage and budget, on every replay alike.
"""

from __future__ import annotations

import pickle
from collections.abc import Sequence
from typing import Any

from temporalio import workflow

from agentloop.durable._temporal_activities import Activities, _owner, failure
from agentloop.errors import ConfigurationError
from agentloop.guardrails import Guardrail, GuardrailContext
from agentloop.guardrails._base import Live
from agentloop.messages import Usage

__all__ = ["Verdicts", "guardrail_call"]


def _guardrails(owner: Any) -> tuple[Guardrail, ...]:
    """Every guardrail of ``owner`` (an agent), input and output."""
    sorted_ = getattr(owner, "_guardrails", None)
    if sorted_ is None:
        return ()
    found: tuple[Guardrail, ...] = (*sorted_.blocking, *sorted_.parallel, *sorted_.output)
    return found


class Verdicts:
    """The workflow's side: each verdict of the run's own checks is the guardrail activity."""

    def __init__(self, agent: Any, receivers: Sequence[Any], activities: Activities) -> None:
        self._agent = agent
        self._receivers = tuple(receivers)
        self._activities = activities

    def _key(self, guardrail: Guardrail) -> int | bool | None:
        """The place of the agent that owns ``guardrail`` (None: the agent); False: unknown."""
        if any(g is guardrail for g in _guardrails(self._agent)):
            return None
        for key, receiver in enumerate(self._receivers):
            if any(g is guardrail for g in _guardrails(receiver)):
                return key
        return False

    async def __call__(
        self, guardrail: Guardrail, ctx: GuardrailContext[Any], value: Any, live: Live
    ) -> str | None:
        """The verdict the activity reached (on replay: the one it recorded)."""
        key = self._key(guardrail)
        if key is False or ctx.run_id != workflow.info().workflow_id:
            return await live(ctx, value)  # not one of this run's own checks
        where = (ctx.run_id, ctx.session_id, ctx.turn, ctx.kind, ctx.call)
        payload = pickle.dumps((key, guardrail.name, value, where, ctx.deps))
        activities = self._activities
        reason, reports = await activities.execute(activities.guardrail, payload)
        if ctx._report is not None:
            for usage, model in reports:
                ctx._report(usage, model)
        verdict: str | None = reason
        return verdict


async def guardrail_call(agent: Any, receivers: Sequence[Any], payload: bytes) -> bytes:
    """The guardrail activity's body: ``(reason, [(usage, model), ...])``, pickled.

    The check runs as the engine runs it (its timeout, fail closed), with the worker's client
    of the owning agent as ``ctx.client``.
    """
    key, name, value, (run_id, session_id, turn, kind, call), deps = pickle.loads(payload)
    owner = _owner(agent, receivers, key)
    guardrail = next((g for g in _guardrails(owner) if g.name == name), None)
    if guardrail is None:
        error = ConfigurationError(
            f"the worker's agent has no guardrail '{name}': build every worker's TemporalAgent "
            "with the same guardrails",
            field="guardrails",
        )
        raise failure(error)
    reports: list[tuple[Usage, str]] = []
    ctx: GuardrailContext[Any] = GuardrailContext(
        deps,
        run_id,
        session_id,
        turn,
        kind,
        call,
        owner.client,
        lambda usage, model: reports.append((usage, model)),
    )
    reason = await guardrail._evaluated(ctx, value)
    return pickle.dumps((reason, reports))
