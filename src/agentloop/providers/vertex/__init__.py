"""Gemini and Claude on Google Vertex AI (extra ``vertex``: google-auth for credentials only).

``VertexClient`` is built by ``build_client(Settings(provider="vertex", ...))`` or
``Agent("vertex:gemini-2.5-flash")`` / ``Agent("vertex:claude-sonnet-4-5@20250929")``; the wire
rules are in ``client``'s docstring, credentials and URLs in ``_auth``. Importing this package
does not import google-auth.
"""

from agentloop.providers.vertex.client import VERTEX_ANTHROPIC_VERSION, VertexClient

__all__ = ["VERTEX_ANTHROPIC_VERSION", "VertexClient"]
