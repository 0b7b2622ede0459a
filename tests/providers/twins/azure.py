"""Azure OpenAI twin: Azure's endpoint, key and content filter in front of the Chat twin.

``shared/spec/provider-rules.md`` ("Azure OpenAI") lists the rules; the twin answers as Azure
does, with Azure's bodies:

1. The key travels in ``api-key``; a missing or wrong one, or a key sent as
   ``Authorization: Bearer`` (Azure reads that header as an Entra token), is 401 "Access denied
   due to invalid subscription key or wrong API endpoint. ...".
2. The v1 API ``/openai/v1/chat/completions`` takes the deployment as ``model``; the dated API
   ``/openai/deployments/{deployment}/chat/completions`` needs ``?api-version=`` (else 404
   "Resource not found"). A deployment the resource lacks is 404 ``DeploymentNotFound``.
3. The prompt filter: a user message holding a word of ``blocked`` is 400 with ``error.code:
   "content_filter"``, ``innererror.code: "ResponsibleAIPolicyViolation"`` and the filter
   results; a filtered completion is the Chat twin's ``finish_reason="content_filter"``.

4. The v1 API's ``/openai/v1/responses`` is the Responses twin's, with the resource's own
   secret: a reasoning item's ``encrypted_content`` another organisation (OpenAI itself) wrote is
   400 ``invalid_encrypted_content`` here, and Azure's is the same 400 at OpenAI
   (provider-rules "OpenAI" 8: "Azure <-> OpenAI").

Everything else (rules per model, replies, streams) is ``OpenAIChatTwin``'s: deployments here
are named after their model, so the Chat twin's model rules apply to them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from aiohttp import web

from .openai_chat import OpenAIChatTwin, Step
from .openai_responses import Reply, ResponsesTwin

SECRET = b"azure-resource"
"""What signs the resource's ``encrypted_content`` (another organisation than OpenAI's twin)."""

ACCESS_DENIED = (
    "Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide "
    "a valid key for an active subscription and use a correct regional API endpoint for your "
    "resource."
)
FILTERED = (
    "The response was filtered due to the prompt triggering Azure OpenAI's content management "
    "policy. Please modify your prompt and retry. To learn more about our content filtering "
    "policies please read our documentation: https://go.microsoft.com/fwlink/?linkid=2198766"
)


class AzureTwin:
    """The twin: one resource's key, deployments, filter words, and the Chat twin behind."""

    def __init__(
        self,
        *steps: Step,
        key: str = "azure-twin-key",
        deployments: Sequence[str] = ("gpt-4o-mini",),
        blocked: Sequence[str] = ("FORBIDDEN",),
        responses: Sequence[Reply] = (),
    ) -> None:
        self.chat = OpenAIChatTwin(list(steps))
        self.responses = ResponsesTwin(*responses, secret=SECRET)
        self.key = key
        self.deployments = tuple(deployments)
        self.blocked = tuple(blocked)
        self.headers: list[Mapping[str, str]] = []
        self.urls: list[str] = []

    def app(self) -> web.Application:
        """The aiohttp application (serve it with ``conftest.serve_app``)."""
        app = web.Application()
        app.router.add_post("/{path:.*}", self._handle)
        return app

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.headers.append(dict(request.headers))
        self.urls.append(str(request.rel_url))
        if request.headers.get("api-key") != self.key or "Authorization" in request.headers:
            return _azure_error(401, "401", ACCESS_DENIED)
        body = await request.json()
        deployment = self._deployment(request, body)
        if deployment is None:
            return _azure_error(404, "404", "Resource not found")
        if deployment not in self.deployments:
            return _azure_error(
                404,
                "DeploymentNotFound",
                "The API deployment for this resource does not exist. If you created the "
                "deployment within the last 5 minutes, please wait a moment and try again.",
            )
        if self._blocked(body):
            return web.json_response({"error": _filter_error()}, status=400)
        if request.path == "/openai/v1/responses":
            return await self.responses.answer(request)
        return await self.chat._handle(request)

    def _deployment(self, request: web.Request, body: Mapping[str, Any]) -> str | None:
        parts = request.path.split("/")
        if request.path in ("/openai/v1/chat/completions", "/openai/v1/responses"):
            return str(body.get("model"))
        dated = len(parts) == 6 and parts[1:3] == ["openai", "deployments"]
        if dated and parts[4:] == ["chat", "completions"] and request.query.get("api-version"):
            return parts[3]
        return None

    def _blocked(self, body: Mapping[str, Any]) -> bool:
        for message in body.get("messages") or body.get("input") or []:
            content = message.get("content")
            text = content if isinstance(content, str) else str(content)
            if message.get("role") == "user" and any(w in text for w in self.blocked):
                return True
        return False


def _filter_error() -> dict[str, Any]:
    results = {
        "hate": {"filtered": False, "severity": "safe"},
        "self_harm": {"filtered": False, "severity": "safe"},
        "sexual": {"filtered": False, "severity": "safe"},
        "violence": {"filtered": True, "severity": "high"},
    }
    return {
        "message": FILTERED,
        "type": None,
        "param": "prompt",
        "code": "content_filter",
        "status": 400,
        "innererror": {
            "code": "ResponsibleAIPolicyViolation",
            "content_filter_result": results,
        },
    }


def _azure_error(status: int, code: str, message: str) -> web.Response:
    return web.json_response({"error": {"code": code, "message": message}}, status=status)
