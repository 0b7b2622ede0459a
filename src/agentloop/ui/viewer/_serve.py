"""``agentloop ui``: check the store, then serve the viewer with uvicorn until Ctrl-C.

The store is opened before the server starts, so a wrong path is one line and exit status 2
(from the CLI's error handler), not a page that only ever says the store is missing.

Deciding a pending call continues the run, which needs the agent that ran it (its client and
tools) and the application's deps: ``agentloop ui --agent MODULE:NAME`` names an ``Agent`` built
over the same store, and ``--deps MODULE:CALLABLE`` a factory ``(run) -> deps`` (the command line
imports them as it imports ``--tools``). ``agent_continuer(agent, deps=...)`` makes the
continuer an application passes to ``ViewerApp`` itself; before a decision is accepted, its
``check`` refuses an approval for a tool the agent does not have (SPEC 17), so the page says so
and the run stays paused.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from agentloop.errors import ConfigurationError
from agentloop.ui.viewer._app import Continuer, ViewerApp

if TYPE_CHECKING:
    from agentloop import Agent, Run
    from agentloop.pausing import Decision, PendingCall

__all__ = ["DEFAULT_PORT", "AgentContinuer", "agent_continuer", "serve"]

DEFAULT_PORT = 8765
LOCAL_NAMES = ("127.0.0.1", "localhost", "::1")


class AgentContinuer:
    """Continues a run on ``agent``'s session of the same id, with ``deps`` (SPEC 17).

    ``deps`` is a value or a factory ``(run) -> deps``, given to ``continue_run(deps=...)``.
    """

    judges_turn_agent = True
    """Its ``check`` takes the run's ``last_agent`` (a handoff receiver's calls, SPEC 26)."""

    def __init__(self, agent: Agent[Any], *, deps: Any = None) -> None:
        self.agent = agent
        self.deps = deps
        self._made: dict[str, Any] = {}
        """Deps ``check`` made for a run (a factory is called once), used by its continue."""

    async def __call__(
        self, session_id: str, run_id: str, decisions: Mapping[str, Decision]
    ) -> Run[Any]:
        """Continue the run (the session is restored from the agent's store)."""
        session = self.agent.session(session_id)
        deps = self._made.pop(run_id, self.deps)
        return await session.continue_run(decisions=decisions, deps=deps)

    async def check(
        self,
        pending: tuple[PendingCall, ...],
        decisions: Mapping[str, Decision],
        last_agent: str | None = None,
        run: Run[Any] | None = None,
    ) -> None:
        """``InvalidInput`` naming the tool when the agent of the turn cannot run a call.

        With the ``run``: naming ``memory=`` too when its paused turn staged memory writes the
        agent cannot apply (SPEC 27), and judging toolsets as the continuation resolves them,
        with the deps (a factory called here, once: the continue uses what it made), so the page
        says so before the redirect, where a refusal would reach nobody.
        """
        from agentloop.engine.handoff_carry import turn_agent
        from agentloop.engine.pause import check_continuable
        from agentloop.engine.pause_tools import (
            check_memory,
            check_offered,
            judged_with_deps,
            stored_child,
        )

        if run is not None:
            check_memory(self.agent, run, stored_child(self.agent.store))
        await check_continuable(self.agent, pending, decisions, last_agent)
        agent = turn_agent(self.agent, last_agent)
        if run is None or not judged_with_deps(agent, run, decisions):
            return
        deps = self.deps(run) if callable(self.deps) else self.deps
        if inspect.isawaitable(deps):
            deps = await deps
        await check_offered(agent, run, decisions, deps, ())
        self._made[run.id] = deps

    def with_deps(self, deps: Any) -> AgentContinuer:
        """The same continuer with these deps."""
        return AgentContinuer(self.agent, deps=deps)


def agent_continuer(agent: Agent[Any], *, deps: Any = None) -> AgentContinuer:
    """A continuer that continues a run on ``agent``'s session of the same id (SPEC 17)."""
    return AgentContinuer(agent, deps=deps)


def serve(
    store: str,
    *,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    allow_decisions: bool = False,
    agent: object = None,
    deps: Any = None,
) -> int:
    """Serve the viewer over ``store`` on ``host:port`` until Ctrl-C; returns 0.

    ``agent`` is the ``Agent`` that continues a decided run (needed with ``allow_decisions``);
    ``deps`` what its tools read (a value or a factory ``(run) -> deps``).
    """
    import uvicorn

    from agentloop import Agent

    if allow_decisions and agent is None:
        raise ConfigurationError(
            "--allow-decisions needs --agent MODULE:NAME, the Agent that continues the runs",
            field="agent",
        )
    if agent is not None and not isinstance(agent, Agent):
        kind = type(agent).__name__
        raise ConfigurationError(f"--agent names a {kind}, not an Agent", field="agent")
    if deps is not None and agent is None:
        raise ConfigurationError(
            "--deps is for the Agent that continues decided runs: give --agent MODULE:NAME too",
            field="deps",
        )
    continuer: Continuer | None = None if agent is None else agent_continuer(agent, deps=deps)
    app = ViewerApp(
        store,
        allow_decisions=allow_decisions,
        continuer=continuer,
        hosts=["*"] if host in ("0.0.0.0", "::") else (host, *LOCAL_NAMES),
    )
    app.reader.check()  # a missing or foreign store: InvalidInput / MemoryBackendError now
    mode = "decisions allowed" if allow_decisions else "read-only"
    shown = f"[{host}]" if ":" in host else host
    print(f"agentloop run viewer on http://{shown}:{port}/ over {store} ({mode}; Ctrl-C stops)")
    try:
        uvicorn.run(app, host=host, port=port, log_level="warning", timeout_graceful_shutdown=2)
    finally:
        app.close()
    return 0
