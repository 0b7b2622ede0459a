"""``agentloop continue ID --agent MODULE:NAME``: go on with the application's own agent.

A run an application paused (its web app, its worker) ran with the application's ``Agent``: its
instructions, guardrails, hooks, tools and client. ``agentloop continue --provider P`` rebuilds
the command line's own agent instead (the read-only workspace tools and ``--tools``, no
instructions, no guardrails), which is right for a run ``agentloop run`` paused and wrong for an
application's: its model would go on without the application's instructions, offered tools the
application never gave it, and its answer would pass no guardrail. ``--agent`` names the
application's ``Agent`` (as ``agentloop ui --agent`` does), and the run goes on on that agent's
session of the run's id, over the store ``--store`` names.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from agentloop.cli.advice import Target
from agentloop.errors import ConfigurationError

if TYPE_CHECKING:
    from agentloop import Agent, Session
    from agentloop.store import PostgresStore, SQLiteStore

__all__ = ["app_session", "check_agent_flags"]

_BUILDING = (("--provider", "provider"), ("--model", "model"), ("--base-url", "base_url"))


def check_agent_flags(args: argparse.Namespace) -> None:
    """``--agent`` or ``--provider``, not both and not neither (``ConfigurationError``: exit 2)."""
    if not args.agent:
        if not args.provider:
            raise ConfigurationError(
                "agentloop continue needs --provider (the command line's own agent, as "
                "agentloop run built it) or --agent MODULE:NAME (the application's Agent, "
                "whose instructions, guardrails and tools the run was paused with)",
                field="provider",
            )
        return
    given = [flag for flag, name in _BUILDING if getattr(args, name)]
    if args.tools:
        given.append("--tools")
    if given:
        raise ConfigurationError(
            f"--agent continues the run with the application's own Agent (its client, tools, "
            f"instructions and guardrails): leave out {', '.join(given)}",
            field="agent",
        )


def app_session(
    spec: str, session_id: str, store: SQLiteStore | PostgresStore
) -> tuple[Agent[Any], Session[Any], Target]:
    """The ``Agent`` ``spec`` names, its session of ``session_id`` over ``store``, its target."""
    from agentloop import Agent
    from agentloop.cli.named import named_object

    agent = named_object(spec, "--agent")
    if not isinstance(agent, Agent):
        kind = type(agent).__name__
        raise ConfigurationError(f"--agent {spec} names a {kind}, not an Agent", field="agent")
    session = agent.session(session_id, store=store)
    client = agent.client
    model, url = getattr(client, "model", None), getattr(client, "base_url", None)
    target = Target(
        f"the agent {spec}'s client",
        model if isinstance(model, str) else None,
        url if isinstance(url, str) else None,
    )
    return agent, session, target
