"""Vertex AI twin: Google's URL and token rules in front of the Gemini and Anthropic twins.

``shared/spec/provider-rules.md`` ("Google Vertex AI") lists the rules; the twin answers as
Vertex does:

1. ``Authorization: Bearer <token>`` with the twin's access token; none is 401
   ``UNAUTHENTICATED`` "Request is missing required authentication credential. ...", another
   token 401 "Request had invalid authentication credentials. ...", and an API key
   (``x-goog-api-key``) 401 "API keys are not supported by this API. ...".
2. The URL: ``/v1/projects/{project}/locations/{location}/publishers/{google|anthropic}/models/
   {model}:{method}``; another project is 403 ``PERMISSION_DENIED``, a location the twin does
   not serve 400 ``INVALID_ARGUMENT``, a method the publisher lacks 404 ``NOT_FOUND`` (Google's
   ``{"error": {"code", "message", "status"}}`` each time).
3. Claude (publisher ``anthropic``, ``:rawPredict`` / ``:streamRawPredict``): ``model`` in the
   body is "model: Extra inputs are not permitted", ``anthropic_version`` other than
   ``vertex-2023-10-16`` "anthropic_version: Input should be 'vertex-2023-10-16'"; then the
   Anthropic twin's rules (thinking blocks signed by the twin, thinking settings, media), with
   the model the URL names, and its replies; SPEC 28's append-only binding included (a block
   of an append-only model bound to a hash of its prefix, the 400 when that changed).
5. Claude's beta features travel in the body as ``anthropic_beta`` (a list of strings); an
   ``anthropic-beta`` header is not read, so a feature asked for only there is the Anthropic
   twin's "requires the beta" 400.
6. Mid-conversation system messages (SPEC 28's entries in place) are the Claude API's alone
   (provider-rules, Anthropic late 2026, rule 6; the profile turns them off on Vertex): a
   ``system`` role is "messages.N.role: Input should be 'user' or 'assistant'".
4. Gemini (publisher ``google``, ``:generateContent`` / ``:streamGenerateContent?alt=sse``): the
   Gemini twin's rules (thought signatures per model, ``generationConfig``, media) and replies;
   its signatures are its own (``twin-sig-vertex-N``): one the Gemini API's twin issued is
   "Corrupted thought signature." here, and the reverse.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from aiohttp import web

from . import anthropic as claude
from .gemini import GeminiTwin, Reply, google_error

MISSING = (
    "Request is missing required authentication credential. Expected OAuth 2 access token, "
    "login cookie or other valid authentication credential. See https://developers.google.com/"
    "identity/sign-in/web/devconsole-project."
)
INVALID = (
    "Request had invalid authentication credentials. Expected OAuth 2 access token, login "
    "cookie or other valid authentication credential. See https://developers.google.com/"
    "identity/sign-in/web/devconsole-project."
)
API_KEY = (
    "API keys are not supported by this API. Expected OAuth2 access token or other "
    "authentication credentials that assert a principal. See https://cloud.google.com/docs/"
    "authentication"
)
VERSION = "vertex-2023-10-16"
_VERTEX_KEYS = ("anthropic_version", "anthropic_beta")
_METHODS = {
    "google": {"generateContent": False, "streamGenerateContent": True},
    "anthropic": {"rawPredict": False, "streamRawPredict": True},
}


class VertexTwin:
    """The twin: a token, a project, its locations, and the two publishers' twins."""

    def __init__(
        self,
        *,
        gemini: Sequence[Reply] = (),
        claude_script: Sequence[claude.Step] = (),
        token: str = "ya29.twin-token",
        project: str = "twin-project",
        locations: Sequence[str] = ("global", "us-east5", "europe-west1"),
    ) -> None:
        self.gemini = GeminiTwin(*gemini, sign="twin-sig-vertex-")
        self.claude = claude.AnthropicTwin(claude_script)
        self.token = token
        self.project = project
        self.locations = tuple(locations)
        self.paths: list[str] = []
        self.bodies: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.refused: list[str] = []

    def app(self) -> web.Application:
        """The aiohttp application (serve it with ``conftest.serve_app``)."""
        app = web.Application()
        app.router.add_post(
            "/v1/projects/{project}/locations/{location}/publishers/{publisher}/models/{call}",
            self._handle,
        )
        return app

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.paths.append(str(request.rel_url))
        body = await request.json()
        self.bodies.append(body)
        self.headers.append(dict(request.headers))
        refusal = self._auth(request) or self._place(request)
        if refusal is not None:
            self.refused.append(refusal[1])
            return google_error(*refusal)
        publisher = request.match_info["publisher"]
        model, _, method = request.match_info["call"].partition(":")
        if publisher == "anthropic":
            return await self._claude(request, body, model, _METHODS[publisher][method])
        return await self._gemini(request, body, model, _METHODS[publisher][method])

    def _auth(self, request: web.Request) -> tuple[int, str, str] | None:
        if "x-goog-api-key" in request.headers:
            return 401, API_KEY, "UNAUTHENTICATED"
        header = request.headers.get("Authorization")
        if header is None:
            return 401, MISSING, "UNAUTHENTICATED"
        if header != f"Bearer {self.token}":
            return 401, INVALID, "UNAUTHENTICATED"
        return None

    def _place(self, request: web.Request) -> tuple[int, str, str] | None:
        info = request.match_info
        publisher, (model, _, method) = info["publisher"], info["call"].partition(":")
        if info["project"] != self.project:
            resource = (
                f"//aiplatform.googleapis.com/projects/{info['project']}/locations/"
                f"{info['location']}/publishers/{publisher}/models/{model}"
            )
            message = (
                f"Permission 'aiplatform.endpoints.predict' denied on resource '{resource}' "
                "(or it may not exist)."
            )
            return 403, message, "PERMISSION_DENIED"
        if info["location"] not in self.locations:
            return 400, f"Unsupported location: {info['location']}", "INVALID_ARGUMENT"
        if method not in _METHODS.get(publisher, {}):
            return 404, f"Method {method} of publisher {publisher} was not found.", "NOT_FOUND"
        if (
            publisher == "google"
            and _METHODS[publisher][method]
            and request.query.get("alt") != "sse"
        ):
            return 400, "twin: streamGenerateContent without alt=sse", "INVALID_ARGUMENT"
        return None

    async def _claude(
        self, request: web.Request, body: Mapping[str, Any], model: str, stream: bool
    ) -> web.StreamResponse:
        problem = None
        if "model" in body:
            problem = "model: Extra inputs are not permitted"
        elif body.get("anthropic_version") != VERSION:
            problem = f"anthropic_version: Input should be '{VERSION}'"
        elif not _beta_list(body.get("anthropic_beta", [])):
            problem = "anthropic_beta: Input should be a valid list of strings"
        else:
            problem = _entries(body)
        if problem is not None:
            self.refused.append(problem)
            return claude._error(400, "invalid_request_error", problem, "req_vertex")
        checked = {k: v for k, v in body.items() if k not in _VERTEX_KEYS}
        checked["model"] = model.partition("@")[0]
        beta = ",".join(body.get("anthropic_beta", []))  # rule 5: never the header
        twin = self.claude
        number = len(twin.requests) + len(twin.rejected)
        answer = await twin.serve(request, checked, beta, number, sent=body)
        if answer.status != 200 and twin.rejected:
            self.refused.append(twin.rejected[-1])
        return answer

    async def _gemini(
        self, request: web.Request, body: dict[str, Any], model: str, stream: bool
    ) -> web.StreamResponse:
        twin = self.gemini
        twin.model = model
        problem = twin.violation(model, body)
        if problem is not None:
            self.refused.append(problem)
            return google_error(400, problem)
        reply = twin.script.pop(0)
        if reply.error is not None:
            return google_error(reply.status, reply.error, "UNAVAILABLE")
        if stream:
            return await twin._sse(request, reply)
        return web.Response(
            text=json.dumps(twin.json_reply(reply)), content_type="application/json"
        )


def _entries(body: Mapping[str, Any]) -> str | None:
    """Rule 6: no mid-conversation system message (documented for the Claude API only)."""
    for i, message in enumerate(body.get("messages") or []):
        if message.get("role") not in ("user", "assistant"):
            return f"messages.{i}.role: Input should be 'user' or 'assistant'"
    return None


def _beta_list(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(b, str) for b in value)
