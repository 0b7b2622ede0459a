"""Azure OpenAI: Chat Completions on a resource's endpoint, keyed by ``api-key`` (SPEC 24).

``AzureOpenAIClient`` is ``OpenAIClient`` with Azure's three differences (provider-rules
"Azure OpenAI"):

- The key travels in the ``api-key`` header, never ``Authorization`` (the header is a
  credential header: redacted from every error).
- The v1 API: ``{endpoint}/openai/v1/chat/completions`` with the *deployment* name as
  ``model``. With ``api_version`` the dated API: ``{endpoint}/openai/deployments/{deployment}/
  chat/completions?api-version={api_version}``; the deployment goes into the path, so it is
  checked as one safe path segment before any request (``_paths``).
- Content filtering: a prompt the filter blocks is HTTP 400 with ``error.code:
  "content_filter"`` (``innererror.code: "ResponsibleAIPolicyViolation"``): that is
  ``ModelRefused("content_filter")``, never a ``BadRequestError`` a fallback would try
  elsewhere; a filtered completion (``finish_reason: "content_filter"``) is one already, as on
  OpenAI.

Everything else (profiles by model name, media, strict schemas, streaming) is ``OpenAIClient``'s:
the deployment name is looked up in the profile table like a model name, so a deployment named
after its model (``gpt-5.4``) gets that model's rules and any other name the generic chat row.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import quote

from agentloop.errors import BadRequestError, ConfigurationError, ModelRefused
from agentloop.model import ModelRequest, ModelResponse, StreamEvent
from agentloop.providers._client import require_key
from agentloop.providers._paths import path_segment
from agentloop.providers.openai.chat import OpenAIClient

__all__ = ["AzureOpenAIClient", "azure_root"]

_PROVIDER = "azure"


def azure_root(endpoint: str) -> str:
    """The resource's root URL: ``endpoint`` without a trailing ``/openai/v1`` or ``/openai``."""
    root = endpoint.rstrip("/")
    for tail in ("/openai/v1", "/openai"):
        root = root.removesuffix(tail)
    return root


def _deployment(name: str) -> str:
    return path_segment(name, provider="Azure OpenAI", example="gpt-5-mini", what="deployment")


class AzureOpenAIClient(OpenAIClient):
    """``ModelClient`` for Azure OpenAI's Chat Completions (v1 API, or the dated API).

    Args:
        model: The deployment name (sent as ``model``; in the path with ``api_version``).
        api_key: Sent as ``api-key``; None reads ``AZURE_OPENAI_API_KEY``.
        endpoint: The resource, ``https://<resource>.openai.azure.com`` (a trailing
            ``/openai/v1`` is accepted); None reads ``AZURE_OPENAI_ENDPOINT``.
        api_version: None for the v1 API; a date (``2024-10-21``) for the dated API.
        **options: ``OpenAIClient``'s other keywords (``timeout``, ``headers``...).
    """

    default_provider = _PROVIDER

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        endpoint: str | None = None,
        api_version: str | None = None,
        **options: Any,
    ) -> None:
        endpoint = endpoint or os.environ.get("AZURE_OPENAI_ENDPOINT", "").strip() or None
        if endpoint is None:
            raise ConfigurationError(
                "azure needs the resource endpoint: AZURE_OPENAI_ENDPOINT or "
                "Settings(base_url='https://<resource>.openai.azure.com')",
                field="base_url",
            )
        if api_version is not None and (not isinstance(api_version, str) or not api_version):
            raise ConfigurationError("api_version must be a non-empty string", field="api_version")
        key = require_key(api_key, "AZURE_OPENAI_API_KEY", _PROVIDER)
        self.root = azure_root(endpoint)
        self.api_version = api_version
        if api_version is not None:
            _deployment(model)
        headers = {**(options.pop("headers", None) or {}), "api-key": key}
        super().__init__(model, base_url=f"{self.root}/openai/v1", headers=headers, **options)

    def _url_for(self, model: str) -> str:
        if self.api_version is None:
            return self.url
        version = quote(self.api_version, safe="")
        return (
            f"{self.root}/openai/deployments/{_deployment(model)}/chat/completions"
            f"?api-version={version}"
        )

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """``OpenAIClient.complete``; a content-filter 400 is ``ModelRefused``."""
        with _content_filter():
            return await super().complete(request)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """``OpenAIClient.stream``; a content-filter 400 is ``ModelRefused``."""
        with _content_filter():
            async for event in super().stream(request):
                yield event


@contextmanager
def _content_filter() -> Iterator[None]:
    try:
        yield
    except BadRequestError as error:
        if _filtered(error.body):
            raise ModelRefused("content_filter") from error
        raise


def _filtered(body: object) -> bool:
    """Whether an Azure error body is the content filter's (``error.code``)."""
    try:
        data = json.loads(body) if isinstance(body, str) else None
    except ValueError:
        return False
    error = data.get("error") if isinstance(data, dict) else None
    return isinstance(error, dict) and error.get("code") == "content_filter"
