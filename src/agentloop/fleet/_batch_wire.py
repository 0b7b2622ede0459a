"""The providers' batch APIs (SPEC 25): submit requests, read a batch's results.

OpenAI: the requests as a JSONL file (``POST /v1/files``, purpose ``batch``), then ``POST
/v1/batches`` (endpoint ``/v1/chat/completions``, ``completion_window "24h"``); results in the
batch's output and error files. Anthropic: ``POST /v1/messages/batches``; results as JSONL at
the batch's ``results_url``. Each request's body is the one the client would send synchronously
(its own encoder), each result is parsed by the client's own reply parser, and each failure is
classified as its status and body would be synchronously (SPEC 8). Every call goes through
the client's own ``HttpTransport`` (``providers._http_calls``: its session, headers, proxy, TLS,
redaction), and so through an active cassette (SPEC 23) as its model requests do.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from agentloop._util.slots import record
from agentloop.errors import (
    AgentLoopError,
    BadRequestError,
    Cancelled,
    ConfigurationError,
    ProviderTimeout,
)
from agentloop.model import ModelClient, ModelRequest, ModelResponse

__all__ = ["RESULTS_LIMIT", "Outcome", "Submitted", "batch_client", "fetch", "submit"]

RESULTS_LIMIT = 256 * 1024 * 1024
"""Largest results file read, in bytes (a model reply's limit is 10 MiB; a batch holds many)."""


@record
class Submitted:
    """A batch the provider accepted."""

    provider: str
    batch_id: str
    submitted_at: float


@record
class Outcome:
    """One request's result: the reply, or the error that stands for it (SPEC 25's mapping)."""

    reply: ModelResponse | None = None
    error: AgentLoopError | None = None


def batch_client(client: ModelClient) -> Any:
    """The OpenAI Chat or Anthropic client under ``client``'s wrappers; else ``ConfigurationError``.

    A ``FallbackClient`` or another provider (an OpenAI-compatible one included: OpenRouter,
    Ollama, Azure) cannot take batch runs (nothing is sent).
    """
    from agentloop.providers.anthropic.client import AnthropicClient
    from agentloop.providers.fallback import FallbackClient
    from agentloop.providers.openai.chat import OpenAIClient
    from agentloop.providers.openai.responses import OpenAIResponsesClient

    current: Any = client
    while type(current) not in (OpenAIClient, OpenAIResponsesClient, AnthropicClient):
        if isinstance(current, FallbackClient) or not hasattr(current, "inner"):
            raise ConfigurationError(
                f"RunConfig(batch=True) needs an OpenAI (Chat Completions, Responses) or Anthropic "
                "client, "
                f"got {type(current).__name__}: batch runs go through those providers' batch "
                "APIs (no FallbackClient; set batch=False for this agent)"
            )
        current = current.inner
    return current


def _openai_base(client: Any) -> str:
    return str(client.url).removesuffix("/chat/completions").removesuffix("/responses")


def _endpoint(client: Any) -> str:
    """``/v1/chat/completions`` or ``/v1/responses``: the client's own endpoint."""
    return "/v1/responses" if str(client.url).endswith("/responses") else "/v1/chat/completions"


def _body(client: Any, request: ModelRequest) -> Any:
    """The body the client would send synchronously."""
    if _endpoint(client) == "/v1/responses":
        return client._payload(request, False)
    payload, _ = client._payload(request, request.model or client.model, stream=False)
    return json.loads(payload)


async def submit(client: Any, items: Sequence[tuple[str, ModelRequest]]) -> Submitted:
    """One batch of ``items`` (``(custom_id, request)``); raises as a synchronous call would."""
    from agentloop.providers.anthropic.client import AnthropicClient

    if isinstance(client, AnthropicClient):
        requests = [{"custom_id": c, "params": client._payload(r, False)} for c, r in items]
        body = await _json(client, "POST", f"{client.url}/batches", {"requests": requests})
    else:
        body = await _openai_submit(client, items)
    return Submitted(client.provider, str(body["id"]), time.time())


async def _openai_submit(client: Any, items: Sequence[tuple[str, ModelRequest]]) -> dict[str, Any]:
    lines = []
    endpoint = _endpoint(client)
    for custom_id, request in items:
        line = {"custom_id": custom_id, "method": "POST", "url": endpoint}
        lines.append(json.dumps({**line, "body": _body(client, request)}))
    jsonl = ("\n".join(lines) + "\n").encode()
    form = {"purpose": "batch", "file": ("batch.jsonl", jsonl)}
    base = _openai_base(client)
    uploaded = await _json(client, "POST", f"{base}/files", form=form)
    create = {
        "input_file_id": uploaded["id"],
        "endpoint": endpoint,
        "completion_window": "24h",
    }
    return await _json(client, "POST", f"{base}/batches", create)


async def _json(
    client: Any, method: str, url: str, payload: Any = None, *, form: Any = None
) -> dict[str, Any]:
    """One batch API call through the client's transport (and a cassette); a failure raises."""
    from agentloop.providers._http_calls import call

    reply = await call(client._transport, method, url, payload=payload, form=form)
    return reply.data if isinstance(reply.data, dict) else {}


async def _text(client: Any, url: str) -> str:
    """A results file: JSONL, as large as the provider makes it (``RESULTS_LIMIT``)."""
    from agentloop.providers._http_calls import call

    reply = await call(client._transport, "GET", url, limit=RESULTS_LIMIT)
    return str(reply.text)


async def fetch(client: Any, batch_id: str) -> dict[str, Outcome] | None:
    """The batch's results by ``custom_id``; None while it runs.

    A cancelled batch answers every request with ``Cancelled``, a failed one (validation)
    with ``BadRequestError``.
    """
    from agentloop.providers.anthropic.client import AnthropicClient

    if isinstance(client, AnthropicClient):
        return await _anthropic_fetch(client, batch_id)
    return await _openai_fetch(client, batch_id)


async def _openai_fetch(client: Any, batch_id: str) -> dict[str, Outcome] | None:
    base = _openai_base(client)
    batch = await _json(client, "GET", f"{base}/batches/{batch_id}")
    status = batch.get("status")
    if status in ("validating", "in_progress", "finalizing", "cancelling"):
        return None
    if status == "failed":
        error = BadRequestError(f"openai batch {batch_id} failed validation: {batch.get('errors')}")
        return _Every(Outcome(error=error))
    outcomes: dict[str, Outcome] = {}
    for key in ("output_file_id", "error_file_id"):
        if batch.get(key):
            text = await _text(client, f"{base}/files/{batch[key]}/content")
            for line in filter(str.strip, text.splitlines()):
                item = json.loads(line)
                outcomes[str(item["custom_id"])] = _openai_outcome(client, item)
    if status == "cancelled":
        return _Every(Outcome(error=Cancelled()), outcomes)
    return outcomes


def _openai_outcome(client: Any, item: dict[str, Any]) -> Outcome:
    from agentloop.providers._classify import error_for_status
    from agentloop.providers.openai.chat import parse_completion

    response, error = item.get("response"), item.get("error")
    if response is None:
        code = (error or {}).get("code", "")
        if code == "batch_expired":
            return Outcome(error=_expired(client.provider))
        return Outcome(error=Cancelled())
    status, body = int(response.get("status_code", 500)), response.get("body")
    text = json.dumps(body)
    if status >= 300:
        return Outcome(error=error_for_status(status, {}, text, provider=client.provider))
    if _endpoint(client) == "/v1/responses":
        from agentloop.providers.openai.responses import parse_response

        with client._redacting():
            reply = parse_response(
                body, text, provider=client.provider, model=client.model, origin=client._origin
            )
        return Outcome(reply=reply)
    reply = parse_completion(body, text, provider=client.provider, model=client.model)
    return Outcome(reply=reply)


async def _anthropic_fetch(client: Any, batch_id: str) -> dict[str, Outcome] | None:
    batch = await _json(client, "GET", f"{client.url}/batches/{batch_id}")
    if batch.get("processing_status") != "ended":
        return None
    text = await _text(client, str(batch["results_url"]))
    outcomes: dict[str, Outcome] = {}
    for line in filter(str.strip, text.splitlines()):
        item = json.loads(line)
        outcomes[str(item["custom_id"])] = _anthropic_outcome(client, item.get("result") or {})
    return outcomes


def _anthropic_outcome(client: Any, result: dict[str, Any]) -> Outcome:
    from agentloop.errors import FailurePhase
    from agentloop.providers.anthropic.client import error_from_body, parse_response

    kind = result.get("type")
    if kind == "succeeded":
        message = result.get("message")
        return Outcome(reply=parse_response(message, request_id=None, text=json.dumps(message)))
    if kind == "expired":
        return Outcome(error=_expired(client.provider))
    if kind == "errored":
        body = result.get("error") or {}
        detail = body.get("error", body) if isinstance(body, dict) else {}
        return Outcome(error=error_from_body(detail, phase=FailurePhase.STATUS, request_id=None))
    return Outcome(error=Cancelled())


def _expired(provider: str) -> ProviderTimeout:
    return ProviderTimeout(
        f"{provider}: the batch request expired before it ran (completion window 24h)",
        provider=provider,
        request_sent=True,
    )


class _Every(dict[str, Outcome]):
    """Results where a request not listed has ``default`` (a cancelled or failed batch)."""

    def __init__(self, default: Outcome, listed: dict[str, Outcome] | None = None) -> None:
        super().__init__(listed or {})
        self.default = default

    def __missing__(self, key: str) -> Outcome:
        return self.default

    def get(self, key: str, default: Any = None) -> Any:
        return self[key]
