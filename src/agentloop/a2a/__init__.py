"""Agents talking to agents over A2A 1.0 (SPEC 26; extra ``a2a``, the official ``a2a-sdk``).

``A2AApp`` serves an agent (ASGI; also ``agent.to_a2a(...)``): a context is a session, a task
a run, a pause ``INPUT_REQUIRED``. ``RemoteA2AAgent`` calls a remote one as a tool. Nothing
here is imported by ``import agentloop``; importing this package without the extra is
``MissingExtra`` saying ``pip install 'agentloop[a2a]'``.
"""

from agentloop._util.extras import require_extra

require_extra("a2a", ("a2a", "starlette", "sse_starlette", "httpx"), "agentloop.a2a")

from agentloop.a2a._app import A2AApp  # noqa: E402
from agentloop.a2a._remote import RemoteA2AAgent  # noqa: E402

__all__ = ["A2AApp", "RemoteA2AAgent"]
