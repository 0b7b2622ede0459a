"""``agentloop ui``: check the store, then serve the viewer with uvicorn until Ctrl-C.

The store is opened before the server starts, so a wrong path is one line and exit status 2
(from the CLI's error handler), not a page that only ever says the store is missing.

Deciding a pending call continues the run, which needs the agent that ran it (its client and
tools): ``agentloop ui --agent MODULE:NAME`` names an ``Agent`` built over the same store (the
command line imports it as it imports ``--tools``). ``agent_continuer`` makes the continuer an
application passes to ``ViewerApp`` itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from agentloop.errors import ConfigurationError
from agentloop.ui.viewer._app import Continuer, ViewerApp

if TYPE_CHECKING:
    from agentloop import Agent, Run
    from agentloop.pausing import Decision

__all__ = ["DEFAULT_PORT", "agent_continuer", "serve"]

DEFAULT_PORT = 8765
LOCAL_NAMES = ("127.0.0.1", "localhost", "::1")


def agent_continuer(agent: Agent[Any]) -> Continuer:
    """A continuer that continues a run on ``agent``'s session of the same id (SPEC 17)."""

    async def continue_run(
        session_id: str, run_id: str, decisions: Mapping[str, Decision]
    ) -> Run[Any]:
        return await agent.session(session_id).continue_run(decisions=decisions)

    return continue_run


def serve(
    store: str,
    *,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    allow_decisions: bool = False,
    agent: object = None,
) -> int:
    """Serve the viewer over ``store`` on ``host:port`` until Ctrl-C; returns 0.

    ``agent`` is the ``Agent`` that continues a decided run (needed with ``allow_decisions``).
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
    app = ViewerApp(
        store,
        allow_decisions=allow_decisions,
        continuer=None if agent is None else agent_continuer(agent),
        hosts=None if host in ("0.0.0.0", "::") else (host, *LOCAL_NAMES),
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
