"""The run viewer (SPEC 18): ``agentloop ui``, a local web page over a store.

The runs of a store (SQLite file or PostgreSQL URL), filtered by status, model and error class,
and one run's timeline: turns, model calls with tokens and cost, tool calls with their results
(soft errors marked), a hard error with its phase, ``request_sent`` and attempt log, pending
calls, sub-agent runs nested, reasoning collapsed, a tokens-and-cost chart; runs in progress
update live. Read-only unless decisions are allowed; binds 127.0.0.1 by default; every stored
text is redacted before it is shown.

The stack is chosen to be small and to last: Starlette and uvicorn (the ``ui`` extra), HTML
written on the server, one stylesheet and one short script of plain JavaScript served by the
package (``static/``): no framework, no CDN, no build step, nothing to update but Python.

``ViewerApp(store)`` is the ASGI app; ``serve(store, host=, port=)`` runs it with uvicorn.
"""

from __future__ import annotations

from agentloop.ui.viewer._app import Continuer, ViewerApp
from agentloop.ui.viewer._serve import agent_continuer, serve

__all__ = ["Continuer", "ViewerApp", "agent_continuer", "serve"]
