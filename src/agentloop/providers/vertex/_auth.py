"""Vertex AI's credentials through google-auth (extra ``vertex``), and where a request goes.

``Settings.credentials`` (a ``google.auth.credentials.Credentials``) or Application Default
Credentials (``google.auth.default``, scope ``cloud-platform``) become an
``Authorization: Bearer`` token; a token that is missing or about to expire is refreshed in a
worker thread (google-auth's refresh is blocking I/O), never on the event loop. No credentials
found is ``AuthError`` at ``build_client`` time; a refresh the token endpoint refuses is
``AuthError``, one that cannot reach it ``ProviderUnavailable`` (phase ``connect``), both with
``request_sent`` False (nothing went to Vertex).

The project is ``Settings.project``, else ``GOOGLE_CLOUD_PROJECT``, else the one ADC names; none
is a ``ConfigurationError``. The location is ``Settings.region``, else ``GOOGLE_CLOUD_LOCATION``,
else ``global``; ``global`` is served by ``aiplatform.googleapis.com``, any other location by
``{location}-aiplatform.googleapis.com``. Both go into the URL path, so both are checked as
path segments before any request (``_paths``).

google-auth is imported here only, and only when a Vertex client is built.
"""

from __future__ import annotations

import asyncio
import os
import threading
from typing import Any

from agentloop.errors import (
    AuthError,
    ConfigurationError,
    FailurePhase,
    ProviderError,
    ProviderUnavailable,
)
from agentloop.providers._extras import need_extra
from agentloop.providers._paths import path_segment
from agentloop.safety.redact import redact_secrets

__all__ = ["SCOPE", "GoogleAuth", "VertexPlace", "resolve_vertex"]

SCOPE = "https://www.googleapis.com/auth/cloud-platform"


class GoogleAuth:
    """A google-auth ``Credentials`` as a bearer token, refreshed off the event loop."""

    def __init__(self, credentials: Any) -> None:
        self.credentials = credentials
        self._refreshing = threading.Lock()  # a thread lock: any event loop may ask

    async def token(self) -> str:
        """A valid access token (refreshed first when missing or expiring)."""
        credentials = self.credentials
        if not credentials.valid:
            from google.auth import exceptions

            try:
                await asyncio.to_thread(self._refresh)
            except exceptions.RefreshError as exc:  # refused: a revoked or expired grant
                raise _refresh_failed(AuthError, exc, None) from exc
            except exceptions.TransportError as exc:  # the token endpoint was not reached
                raise _refresh_failed(ProviderUnavailable, exc, FailurePhase.CONNECT) from exc
        token = credentials.token
        if not isinstance(token, str) or not token:
            raise AuthError("the Google credentials gave no access token", provider="vertex")
        return token

    def _refresh(self) -> None:
        """Refresh once however many requests found the token stale at the same moment."""
        with self._refreshing:
            if not self.credentials.valid:
                self.credentials.refresh(_refresh_transport())


def _refresh_failed(
    cls: type[ProviderError], exc: Exception, phase: FailurePhase | None
) -> ProviderError:
    """The error of a failed token refresh: nothing was sent to Vertex (``request_sent`` False)."""
    said = redact_secrets(str(exc))[:300]
    return cls(
        f"vertex: refreshing the Google access token failed ({type(exc).__name__}: {said})",
        provider="vertex",
        phase=phase,
        request_sent=False,
    )


def _refresh_transport() -> Any:
    """google-auth's HTTP transport for a token refresh (requests, else urllib3)."""
    try:
        from google.auth.transport.requests import Request

        return Request()
    except ImportError:  # pragma: no cover - google-auth[requests] brings requests
        import urllib3
        from google.auth.transport.urllib3 import Request as Urllib3Request

        return Urllib3Request(urllib3.PoolManager())  # type: ignore[no-untyped-call]


class VertexPlace:
    """The project and location a Vertex client calls, and the host that serves them."""

    def __init__(self, project: str, location: str, base_url: str | None) -> None:
        self.project = path_segment(
            project, provider="Vertex AI", example="my-project", what="project"
        )
        self.location = path_segment(
            location, provider="Vertex AI", example="us-east5", what="location"
        )
        host = "aiplatform.googleapis.com"
        if location != "global":
            host = f"{location}-{host}"
        self.base_url = (base_url or f"https://{host}").rstrip("/")

    def url(self, publisher: str, model: str, method: str) -> str:
        """``.../v1/projects/{p}/locations/{l}/publishers/{publisher}/models/{model}:{method}``."""
        name = path_segment(model, provider="Vertex AI", example="gemini-2.5-flash", extra="@")
        return (
            f"{self.base_url}/v1/projects/{self.project}/locations/{self.location}"
            f"/publishers/{publisher}/models/{name}:{method}"
        )


def resolve_vertex(
    *,
    credentials: Any = None,
    project: str | None = None,
    region: str | None = None,
    base_url: str | None = None,
) -> tuple[GoogleAuth, VertexPlace]:
    """The auth and place of a Vertex client (credentials, project, location).

    Raises:
        ConfigurationError: google-auth is missing, or no project is known.
        AuthError: No credentials given and ADC finds none.
    """
    need_extra("vertex", ["google.auth"], "the vertex provider (Google credentials)")
    found_project = None
    if credentials is None:
        import google.auth
        from google.auth.exceptions import DefaultCredentialsError

        try:
            credentials, found_project = google.auth.default(scopes=[SCOPE])
        except DefaultCredentialsError as exc:
            raise AuthError(
                "no Google credentials found: run 'gcloud auth application-default login', "
                "set GOOGLE_APPLICATION_CREDENTIALS, or pass Settings(credentials=...)",
                provider="vertex",
            ) from exc
    if not hasattr(credentials, "refresh") or not hasattr(credentials, "valid"):
        raise ConfigurationError(
            "credentials for vertex must be google.auth Credentials", field="credentials"
        )
    env = os.environ
    project = project or env.get("GOOGLE_CLOUD_PROJECT", "").strip() or found_project
    if not project:
        raise ConfigurationError(
            "vertex needs a project: Settings(project=...), GOOGLE_CLOUD_PROJECT, or ADC's",
            field="project",
        )
    location = region or env.get("GOOGLE_CLOUD_LOCATION", "").strip() or "global"
    return GoogleAuth(credentials), VertexPlace(project, location, base_url)
