"""Bedrock twin: a local Converse / ConverseStream server that enforces Bedrock's rules.

``shared/spec/provider-rules.md`` ("Amazon Bedrock Converse") lists them; the twin answers a
request that breaks one as AWS does: the HTTP status, ``x-amzn-ErrorType: <Name>:http://
internal.amazon.com/coral/com.amazon.bedrock/``, ``x-amzn-RequestId`` and ``{"message": ...}``.

1. Authentication. ``Authorization: Bearer <key>`` must be the twin's Bedrock API key; else a
   SigV4 signature is *verified with botocore*: the twin rebuilds the request from what arrived
   (method, the raw path as sent, the signed headers, the body), re-signs it with the same
   credentials at the request's ``X-Amz-Date`` (``SigV4Auth.canonical_request`` /
   ``string_to_sign`` / ``signature``) and compares. A wrong key id is
   ``UnrecognizedClientException``; a scope of another region or service, or any difference in
   the signature, ``InvalidSignatureException`` (403); a session key without
   ``X-Amz-Security-Token``, ``UnrecognizedClientException``; no ``Authorization``,
   ``MissingAuthenticationTokenException``.
2. The model id is one path segment, percent-encoded (``:`` as ``%3A``): the raw path is what
   the signature covers, so a client that sends ``:`` but signs ``%3A`` fails rule 1.
3. ``ValidationException`` (400) for what Converse refuses: more than four ``cachePoint``
   blocks, or one that does not follow a content block (or follows reasoning, which would
   put ``cache_control`` on a thinking block); a conversation that does not start
   with ``user`` or does not alternate; a blank text block; ``toolUse``/``toolResult`` blocks
   without ``toolConfig``; ``toolResult`` blocks that do not answer the previous turn's
   ``toolUse`` ids; and, with Claude thinking ``enabled``, a final assistant turn of
   ``toolUse`` that does not start with its ``reasoningContent`` (Anthropic's text, as Bedrock
   relays it), or a reasoning signature the twin never issued.
4. Replies are scripted (``Reply``): text, reasoning (signed by the twin), tool calls, any
   ``stopReason``, usage, an AWS error (``Reply.aws``) or a mid-stream exception frame
   (``Reply.stream_error``). Streams are AWS event-stream frames (``agentloop.testing.
   fake_converse.frame``), which botocore's decoder reads with their CRCs checked.
5. SPEC 28 (``bedrock_prefix``): a reasoning block served to an append-only Claude (Fable/Mythos
   5.x, Opus/Sonnet/Haiku 5.5) is bound to a hash of its prefix; sent back after ``system``,
   ``toolConfig`` or an earlier message changed, it is Anthropic's "bound to a different
   conversation" as a ``ValidationException``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from aiohttp import web
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from agentloop.testing.fake_converse import event_frame, exception_frame

from .bedrock_prefix import Binder

CORAL = "http://internal.amazon.com/coral/com.amazon.bedrock/"
SIGNATURE_MISMATCH = (
    "The request signature we calculated does not match the signature you provided. Check your "
    "AWS Secret Access Key and signing method. Consult the service documentation for details."
)
ALTERNATE = (
    "A conversation must alternate between user and assistant roles. Make sure the "
    "conversation alternates between user and assistant roles and try again."
)
START_WITH_USER = (
    "A conversation must start with a user message. Try again with a conversation that starts "
    "with a user message."
)
TOOL_CONFIG = (
    "The toolConfig field must be defined when using toolUse and toolResult content blocks."
)
THINKING_FIRST = (
    "messages.{i}.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
    "`tool_use`. When `thinking` is enabled, a final `assistant` message must start with a "
    "thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks)."
)
_AUTH = re.compile(
    r"AWS4-HMAC-SHA256 Credential=(?P<akid>[^/]+)/(?P<date>\d{8})/(?P<region>[^/]+)/"
    r"(?P<service>[^/]+)/aws4_request, SignedHeaders=(?P<signed>[^,]+), "
    r"Signature=(?P<sig>[0-9a-f]{64})"
)
_TOP = frozenset(
    {"messages", "system", "inferenceConfig", "toolConfig", "additionalModelRequestFields",
     "guardrailConfig", "performanceConfig", "promptVariables", "requestMetadata"}
)  # fmt: skip


@dataclass
class Reply:
    """One scripted answer (or an AWS error before any frame, or an exception mid-stream)."""

    text: str = ""
    reasoning: str | None = None
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    stop: str = "end_turn"
    usage: dict[str, int] = field(default_factory=lambda: {"inputTokens": 10, "outputTokens": 5})
    status: int = 200
    error_type: str | None = None
    message: str = ""
    stream_error: str | None = None

    @classmethod
    def aws(cls, status: int, error_type: str, message: str) -> Reply:
        """An AWS error reply (``ThrottlingException``, ``ValidationException``...)."""
        return cls(status=status, error_type=error_type, message=message)


@dataclass
class Received:
    """One request the twin accepted or refused."""

    model: str
    raw_path: str
    stream: bool
    headers: dict[str, str]
    body: dict[str, Any]
    status: int = 200


class BedrockTwin:
    """The twin's state: credentials, the script, issued signatures, requests received."""

    def __init__(
        self,
        *replies: Reply,
        access_key: str = "AKIDTWINEXAMPLE",
        secret_key: str = "twin/secret/key",
        token: str | None = None,
        bearer: str | None = None,
        region: str = "us-east-1",
    ) -> None:
        self.script = list(replies)
        self.credentials = Credentials(access_key, secret_key, token)
        self.bearer = bearer
        self.region = region
        self.issued: set[str] = set()
        self.binder = Binder()  # rule 5: append-only Claude binds its reasoning (SPEC 28)
        self._serving: tuple[str, Mapping[str, Any]] = ("", {})
        self.verified = 0
        self.received: list[Received] = []

    def app(self) -> web.Application:
        """The aiohttp application (serve it with ``conftest.serve_app``)."""
        app = web.Application()
        app.router.add_post("/{tail:.*}", self._handle)
        return app

    @property
    def accepted(self) -> list[Received]:
        """The requests the twin answered with 200."""
        return [r for r in self.received if r.status == 200]

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        parts = request.raw_path.split("/")
        stream = parts[-1] == "converse-stream"
        body = json.loads(raw)
        model = (
            request.match_info["tail"].split("/")[1] if "/" in request.match_info["tail"] else ""
        )
        record = Received(model, request.raw_path, stream, dict(request.headers), body)
        self.received.append(record)
        refusal = self._authenticate(request, raw)
        if refusal is None and (len(parts) != 4 or parts[1] != "model"):
            refusal = (404, "UnknownOperationException", "Unknown operation")
        model = unquote(model)
        refusal = refusal or self._validate(body)
        if refusal is None and (mismatch := self.binder.check(model, body)) is not None:
            refusal = (400, "ValidationException", mismatch)
        if refusal is None and not self.script:
            refusal = (500, "InternalServerException", "twin: the script is exhausted")
        if refusal is not None:
            record.status = refusal[0]
            return aws_error(*refusal, request_id=len(self.received))
        reply = self.script.pop(0)
        self._serving = (model, body)
        record.status = reply.status
        if reply.error_type is not None:
            return aws_error(reply.status, reply.error_type, reply.message, len(self.received))
        if stream:
            return await self._stream(request, reply)
        return web.json_response(self.body(reply), headers=_ids(len(self.received)))

    # -- rule 1: authentication ---------------------------------------------------------------

    def _authenticate(self, request: web.Request, raw: bytes) -> tuple[int, str, str] | None:
        header = request.headers.get("Authorization", "")
        if header.startswith("Bearer "):
            if self.bearer is not None and header[7:] == self.bearer:
                return None
            return (
                403,
                "UnrecognizedClientException",
                "Invalid API Key format: Must start with pre-defined prefix",
            )
        match = _AUTH.fullmatch(header)
        if match is None:
            return 403, "MissingAuthenticationTokenException", "Missing Authentication Token"
        frozen = self.credentials.get_frozen_credentials()
        if match["akid"] != frozen.access_key:
            return (
                403,
                "UnrecognizedClientException",
                "The security token included in the request is invalid.",
            )
        if match["region"] != self.region or match["service"] != "bedrock":
            where = f"{match['region']}/{match['service']}"
            scope = f"Credential should be scoped to a valid region. ({where})"
            return 403, "InvalidSignatureException", scope
        if frozen.token and request.headers.get("X-Amz-Security-Token") != frozen.token:
            return (
                403,
                "UnrecognizedClientException",
                "The security token included in the request is invalid.",
            )
        if self.resign(request, raw, match["signed"].split(";")) != match["sig"]:
            return 403, "InvalidSignatureException", SIGNATURE_MISMATCH
        self.verified += 1
        return None

    def resign(self, request: web.Request, raw: bytes, signed: list[str]) -> str:
        """botocore's signature of the request as it arrived, at its own ``X-Amz-Date``."""
        headers = {name: request.headers.get(name, "") for name in signed}
        url = f"http://{request.host}{request.raw_path}"
        again = AWSRequest(method=request.method, url=url, data=raw, headers=headers)
        again.context["timestamp"] = request.headers.get("X-Amz-Date", "")
        signer = SigV4Auth(self.credentials.get_frozen_credentials(), "bedrock", self.region)
        canonical = signer.canonical_request(again)
        return str(signer.signature(signer.string_to_sign(again, canonical), again))

    # -- rule 3: the body ---------------------------------------------------------------------

    def _validate(self, body: Mapping[str, Any]) -> tuple[int, str, str] | None:
        problem = self.violation(body)
        return None if problem is None else (400, "ValidationException", problem)

    def violation(self, body: Mapping[str, Any]) -> str | None:
        """Bedrock's text for the first rule ``body`` breaks, else None."""
        unknown = [k for k in body if k not in _TOP]
        if unknown:
            return f"Malformed input request: extraneous key [{unknown[0]}] is not permitted"
        messages = body.get("messages") or []
        if not messages or messages[0]["role"] != "user":
            return START_WITH_USER
        return (
            _cache_points(body)
            or self._roles(messages)
            or self._tools(body, messages)
            or self._thinking(body, messages)
        )

    def _roles(self, messages: list[Mapping[str, Any]]) -> str | None:
        for i, message in enumerate(messages):
            if i and message["role"] == messages[i - 1]["role"]:
                return ALTERNATE
            for j, block in enumerate(message["content"]):
                if "text" in block and not block["text"].strip():
                    return (
                        f"The text field in the ContentBlock object at messages.{i}.content.{j} "
                        "is blank. Add text to the text field, and try again."
                    )
        return None

    def _tools(self, body: Mapping[str, Any], messages: list[Mapping[str, Any]]) -> str | None:
        uses: list[str] = []
        for i, message in enumerate(messages):
            blocks = message["content"]
            used = [b["toolUse"]["toolUseId"] for b in blocks if "toolUse" in b]
            answered = [b["toolResult"]["toolUseId"] for b in blocks if "toolResult" in b]
            if (used or answered) and "toolConfig" not in body:
                return TOOL_CONFIG
            if len(answered) > len(uses):
                return (
                    f"The number of toolResult blocks at messages.{i}.content exceeds the "
                    "number of toolUse blocks of previous turn."
                )
            missing = [u for u in uses if u not in answered]
            if message["role"] == "user" and missing:
                return (
                    f"Expected toolResult blocks at messages.{i}.content for the following "
                    f"Ids: {', '.join(missing)}"
                )
            uses = used
        return None

    def _thinking(self, body: Mapping[str, Any], messages: list[Mapping[str, Any]]) -> str | None:
        for i, message in enumerate(messages):
            for block in message["content"]:
                text = block.get("reasoningContent", {}).get("reasoningText")
                if text is not None and text.get("signature") not in self.issued:
                    return f"messages.{i}.content: Invalid `signature` in `thinking` block"
        extra = body.get("additionalModelRequestFields") or {}
        if (extra.get("thinking") or {}).get("type") != "enabled":
            return None  # an adaptive turn may not have thought (SPEC 28): no such rule
        last = max((i for i, m in enumerate(messages) if m["role"] == "assistant"), default=None)
        if last is None:
            return None
        blocks = messages[last]["content"]
        if any("toolUse" in b for b in blocks) and "reasoningContent" not in blocks[0]:
            return THINKING_FIRST.format(i=last)
        return None

    # -- rule 4: replies ----------------------------------------------------------------------

    def content(self, reply: Reply) -> list[dict[str, Any]]:
        """The reply's content blocks (reasoning signed by the twin)."""
        blocks: list[dict[str, Any]] = []
        if reply.reasoning is not None:
            signature = f"twin-sig-{len(self.issued) + 1}"
            self.issued.add(signature)
            text = {"text": reply.reasoning, "signature": signature}
            blocks.append({"reasoningContent": {"reasoningText": text}})
        if reply.text:
            blocks.append({"text": reply.text})
        for n, (name, arguments) in enumerate(reply.calls):
            use = {
                "toolUseId": f"tooluse_{len(self.received)}_{n}",
                "name": name,
                "input": arguments,
            }
            blocks.append({"toolUse": use})
        self.binder.bind(*self._serving, blocks)
        return blocks

    def body(self, reply: Reply) -> dict[str, Any]:
        """The whole ``Converse`` body for ``reply``."""
        message = {"role": "assistant", "content": self.content(reply)}
        usage = {**reply.usage, "totalTokens": sum(reply.usage.values())}
        return {"output": {"message": message}, "stopReason": reply.stop, "usage": usage,
                "metrics": {"latencyMs": 12}}  # fmt: skip

    def frames(self, reply: Reply) -> list[bytes]:
        """The ``ConverseStream`` frames of ``reply`` (an exception frame where scripted)."""
        frames = [event_frame("messageStart", {"role": "assistant"})]
        for index, block in enumerate(self.content(reply)):
            where = {"contentBlockIndex": index}
            if "toolUse" in block:
                use = block["toolUse"]
                start = {"toolUse": {"toolUseId": use["toolUseId"], "name": use["name"]}}
                frames.append(event_frame("contentBlockStart", {**where, "start": start}))
                raw = json.dumps(use["input"])
                deltas = [{"toolUse": {"input": raw[:5]}}, {"toolUse": {"input": raw[5:]}}]
            elif "reasoningContent" in block:
                text = block["reasoningContent"]["reasoningText"]
                deltas = [{"reasoningContent": {"text": text["text"]}},
                          {"reasoningContent": {"signature": text["signature"]}}]  # fmt: skip
            else:
                half = len(block["text"]) // 2
                deltas = [{"text": block["text"][:half]}, {"text": block["text"][half:]}]
            frames += [event_frame("contentBlockDelta", {**where, "delta": d}) for d in deltas]
            frames.append(event_frame("contentBlockStop", where))
            if reply.stream_error is not None:
                return [*frames, exception_frame(reply.stream_error, reply.message or "slow down")]
        frames.append(event_frame("messageStop", {"stopReason": reply.stop}))
        usage = {**reply.usage, "totalTokens": sum(reply.usage.values())}
        frames.append(event_frame("metadata", {"usage": usage, "metrics": {"latencyMs": 12}}))
        return frames

    async def _stream(self, request: web.Request, reply: Reply) -> web.StreamResponse:
        headers = {**_ids(len(self.received)), "Content-Type": "application/vnd.amazon.eventstream"}
        response = web.StreamResponse(headers=headers)
        await response.prepare(request)
        for chunk in self.frames(reply):
            await response.write(chunk)
        await response.write_eof()
        return response


def _cache_points(body: Mapping[str, Any]) -> str | None:
    """At most four ``cachePoint`` blocks, none first in a message or right after reasoning."""
    system = body.get("system") or []
    tools = (body.get("toolConfig") or {}).get("tools") or []
    count = sum("cachePoint" in b for b in [*system, *tools])
    for i, message in enumerate(body.get("messages") or []):
        blocks = message["content"]
        for j, block in enumerate(blocks):
            if "cachePoint" not in block:
                continue
            count += 1
            if j == 0 or "reasoningContent" in blocks[j - 1]:
                return f"messages.{i}.content.{j}: a cachePoint must follow a content block"
    if count > 4:
        return f"A maximum of 4 cache checkpoints are allowed per request; found {count}."
    return None


def _ids(number: int) -> dict[str, str]:
    return {"x-amzn-RequestId": f"twin-req-{number:04d}"}


def aws_error(status: int, error_type: str, message: str, request_id: int) -> web.Response:
    """AWS's error reply: the status, ``x-amzn-ErrorType``, the request id, ``{"message"}``."""
    headers = {**_ids(request_id), "x-amzn-ErrorType": f"{error_type}:{CORAL}"}
    return web.json_response({"message": message}, status=status, headers=headers)
