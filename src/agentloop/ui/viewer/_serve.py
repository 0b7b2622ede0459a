"""``agentloop ui``: check the store, then serve the viewer with uvicorn until Ctrl-C.

The store is opened before the server starts, so a wrong path is one line and exit status 2
(from the CLI's error handler), not a page that only ever says the store is missing.

Deciding a pending call continues the run, which needs the agent that ran it (its client and
tools): ``--agent MODULE:NAME`` names an ``Agent`` built over the same store, imported as
uvicorn imports an app (the working directory is on the path). ``agent_continuer`` makes the
continuer an application passes to ``ViewerApp`` itself.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from agentloop.errors import ConfigurationError
from agentloop.ui.viewer._app import Continuer, ViewerApp

if TYPE_CHECKING:
    from agentloop import Agent, Run
    from agentloop.pausing import Decision

__all__ = ["DEFAULT_PORT", "agent_continuer", "load_agent", "serve"]

DEFAULT_PORT = 8765
LOCAL_NAMES = ("127.0.0.1", "localhost", "::1")


def agent_continuer(agent: Agent[Any]) -> Continuer:
    """A continuer that continues a run on ``agent``'s session of the same id (SPEC 17)."""

    async def continue_run(
        session_id: str, run_id: str, decisions: Mapping[str, Decision]
    ) -> Run[Any]:
        return await agent.session(session_id).continue_run(decisions=decisions)

    return continue_run


def load_agent(spec: str) -> Agent[Any]:
    """The ``Agent`` named ``MODULE:NAME`` (``ConfigurationError`` when it is not one)."""
    from agentloop import Agent

    module_name, _, name = spec.partition(":")
    if not module_name or not name:
        raise ConfigurationError(f"--agent takes MODULE:NAME, got {spec!r}", field="agent")
    if "" not in sys.path:
        sys.path.insert(0, "")
    try:
        found = getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError) as exc:
        raise ConfigurationError(f"--agent {spec}: {exc}", field="agent") from exc
    if not isinstance(found, Agent):
        kind = type(found).__name__
        raise ConfigurationError(f"--agent {spec} is a {kind}, not an Agent", field="agent")
    return found


def serve(
    store: str,
    *,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    allow_decisions: bool = False,
    agent: str | Agent[Any] | None = None,
) -> int:
    """Serve the viewer over ``store`` on ``host:port`` until Ctrl-C; returns 0."""
    import uvicorn

    if allow_decisions and agent is None:
        raise ConfigurationError(
            "--allow-decisions needs --agent MODULE:NAME, the Agent that continues the runs",
            field="agent",
        )
    chosen = load_agent(agent) if isinstance(agent, str) else agent
    app = ViewerApp(
        store,
        allow_decisions=allow_decisions,
        continuer=None if chosen is None else agent_continuer(chosen),
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
