"""Faces for applications (SPEC 18): UI protocol apps and the local run viewer.

``agentloop.ui.ag_ui.AGUIApp`` and ``agentloop.ui.vercel.VercelAIApp`` are ASGI apps (extra
``ui``: Starlette) that run an agent per request and stream its events in the AG-UI protocol and
the Vercel AI SDK UI message stream protocol. ``agentloop ui`` serves the run viewer. Nothing
here is imported by ``import agentloop``.

Importing any of them without the extra is ``agentloop._util.extras.MissingExtra`` (a
``ModuleNotFoundError``) saying ``pip install 'agentloop[ui]'``, checked here, before a module
of this package imports Starlette or the AG-UI types. uvicorn, the extra's server, is needed
only to serve the viewer (``agentloop ui``); an application mounts the apps in its own.
"""

from agentloop._util.extras import require_extra

require_extra("ui", ("starlette", "ag_ui"), "agentloop.ui")

__all__: list[str] = []  # the apps live in their modules, each needing the extra
