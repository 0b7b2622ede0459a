"""Faces for applications (SPEC 18): UI protocol apps and the local run viewer.

``agentloop.ui.ag_ui.AGUIApp`` and ``agentloop.ui.vercel.VercelAIApp`` are ASGI apps (extra
``ui``: Starlette) that run an agent per request and stream its events in the AG-UI protocol and
the Vercel AI SDK UI message stream protocol. ``agentloop ui`` serves the run viewer. Nothing
here is imported by ``import agentloop``.
"""

__all__: list[str] = []  # the apps live in their modules, each needing the extra
