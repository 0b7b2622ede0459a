"""What every durable wrapper (``DBOSAgent``, ``TemporalAgent``) checks.

What it wraps, and the decision sets that reach a paused run's workflow from outside.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentloop.engine.agent import Agent
from agentloop.errors import ConfigurationError, InvalidInput
from agentloop.pausing import Decision, PendingCall, check_decisions, decision_from_dict

__all__ = ["accepted_decisions", "checked_wrap", "decision_message", "refuse_batch"]


def checked_wrap(kind: str, agent: object, name: object) -> None:
    """Refuse a ``name`` that is not a non-empty str and an ``agent`` that is not an ``Agent``.

    A batch agent is refused too (``refuse_batch``).
    """
    if not isinstance(name, str) or not name:
        raise ConfigurationError(f"{kind} needs a name (a non-empty str)", field="name")
    if not isinstance(agent, Agent):
        raise ConfigurationError(f"{kind} wraps an agentloop Agent", field="agent")
    refuse_batch(kind, agent)


def refuse_batch(kind: str, agent: Agent[Any]) -> None:
    """``ConfigurationError`` for an agent with ``RunConfig(batch=True)`` (SPEC 14).

    A batch run waits hours on a provider batch between turns, which the durable engines'
    steps and activities cannot hold; checked when wrapping and again when a run starts (the
    agent's config may have been replaced since).
    """
    if agent.config.batch:
        raise ConfigurationError(
            f"{kind} runs each model call as a step and cannot wait on provider batches: wrap "
            "an agent without RunConfig(batch=True) (agentloop.batch runs batch agents)",
            field="batch",
        )


def decision_message(pause: int, decisions: Mapping[str, Decision]) -> dict[str, object]:
    """What a decision set travels as to a paused workflow: plain data, with its pause."""
    return {"pause": pause, "decisions": {k: d.to_dict() for k, d in decisions.items()}}


def accepted_decisions(
    message: object, pending: tuple[PendingCall, ...], pause: int
) -> dict[str, Decision] | None:
    """The decisions of ``message`` when it answers this pause exactly, else None (ignored).

    The workflow's own check of what ``decide`` checked before sending: the message crossed a
    database or a cluster, and one for another pause (or forged) must not continue the run.
    """
    if not isinstance(message, Mapping) or message.get("pause") != pause:
        return None
    raw = message.get("decisions")
    if not isinstance(raw, Mapping):
        return None
    try:
        decisions = {str(k): decision_from_dict(v) for k, v in raw.items()}
        return check_decisions(pending, decisions)
    except (InvalidInput, AttributeError, TypeError):
        return None
