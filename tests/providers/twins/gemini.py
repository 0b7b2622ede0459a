"""Gemini twin: a local ``generateContent`` server that enforces Gemini's documented rules.

``shared/spec/provider-rules.md`` ("Gemini generateContent") lists the rules; this twin answers
a request that breaks one as Gemini does: HTTP 400 with Google's error body
``{"error": {"code": 400, "message": ..., "status": "INVALID_ARGUMENT"}}`` and Gemini's text.

1. Thought signatures. Every reply's first ``functionCall`` (else its last text) is signed with a
   signature the twin issues and remembers. On a Gemini 3 model the first ``functionCall`` of
   every model turn sent back must carry one, else "Function call is missing a thought_signature
   in functionCall parts. ..." (stricter than Gemini, which checks the current turn only). A
   signature the twin never issued, or one moved to a different part, is "Corrupted thought
   signature."; one another model issued (a fallback between Gemini models) is "Invalid thought
   signature." (Gemini 2026 1, reported); Google's bypass value
   ``skip_thought_signature_validator`` passes.
2. ``generationConfig``: unknown fields (a ``thinkingConfig`` outside it included) are
   "Invalid JSON payload received. Unknown name ..."; ``thinkingLevel`` before Gemini 3, or a
   level a Gemini 3 model does not take (3 Pro: LOW/HIGH; 3.x Pro, 3.7+ Flash and later names:
   LOW/MEDIUM/HIGH, so MINIMAL on 3.8 Flash; Gemini 2026 2), is "Thinking level is not
   supported for this model.";
   level and budget together, "You can only set only one of thinking budget and thinking
   level."; a budget under 128 on 2.5 Pro, "The thinking budget (N) is invalid.". Gemini
   silently ignores a config that lost ``maxOutputTokens`` or ``responseJsonSchema`` (a 200 a
   test cannot see), so ``require_config`` names values that must arrive: the twin's stand-in
   for that silent loss answers 400 naming the lost key.
3. Replies are scripted (``Reply``): text, thoughts (``thought: true``), calls, any finish reason
   (``SAFETY``, ``MAX_TOKENS``, ...), a ``promptFeedback.blockReason``, usage with
   ``thoughtsTokenCount`` and ``cachedContentTokenCount``, error statuses, or raw recorded bytes.
   Streams (``:streamGenerateContent?alt=sse``) split each text into chunks and end a signed
   text with an empty signed part, as Gemini does.

4. Media (rule 5). ``inlineData`` needs ``mimeType`` and ``data``, the data must be base64
   ("Invalid value at 'contents[0].parts[1].inline_data.data' (TYPE_BYTES), Base64 decoding
   failed for ..."), the type one Gemini lists ("Unsupported MIME type: image/gif");
   ``fileData`` needs ``fileUri``, and a ``mimeType`` unless the URI is a Files API upload; a
   part holds one kind of data (the protobuf ``oneof``). ``functionResponse.parts`` is
   "Unable to submit request because `function_response.parts` is not supported for this
   model. ..." before Gemini 3; on Gemini 3 each holds ``inlineData`` only (the API schema has
   no ``fileData`` there: "Unknown name") of an image (PNG, JPEG, WebP) or a document type.
   Texts quoted are Gemini's as reported in public issues; "empty ... parameter" for a missing
   field follows the recorded fileData text (the twin's own wording for the others).

Also enforced: the ``x-goog-api-key`` header, roles ``user``/``model``, and as many
``functionResponse`` parts as the model turn before had ``functionCall`` parts.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from . import gemini_builtin

BYPASS = "skip_thought_signature_validator"
MISSING_SIGNATURE = (
    "Function call is missing a thought_signature in functionCall parts. This is required for "
    "tools to work correctly, and missing thought_signature may lead to degraded model "
    "performance. Additional data, function call `default_api:{name}` , position {position}. "
    "Please refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more details."
)
CORRUPTED_SIGNATURE = "Corrupted thought signature."
INVALID_SIGNATURE = "Invalid thought signature."
"""Another model's signature (reported after switching model mid-conversation, Gemini 2026 1)."""
_GENERATION_FIELDS = frozenset(
    {"candidateCount", "stopSequences", "maxOutputTokens", "temperature", "topP", "topK", "seed",
     "responseMimeType", "responseSchema", "responseJsonSchema", "presencePenalty",
     "frequencyPenalty", "responseLogprobs", "logprobs", "thinkingConfig", "responseModalities",
     "mediaResolution", "speechConfig"}
)  # fmt: skip
_THINKING_FIELDS = frozenset({"includeThoughts", "thinkingBudget", "thinkingLevel"})
_TOP_FIELDS = frozenset(
    {"contents", "systemInstruction", "tools", "toolConfig", "generationConfig", "safetySettings",
     "cachedContent"}
)  # fmt: skip
_IMAGES = frozenset({"image/png", "image/jpeg", "image/webp", "image/heic", "image/heif"})
_DOCUMENTS = frozenset({"application/pdf", "text/plain"})
_AUDIO = frozenset({"audio/wav", "audio/mp3", "audio/mpeg", "audio/aiff", "audio/aac",
                    "audio/ogg", "audio/flac"})  # fmt: skip
MEDIA_TYPES = _IMAGES | _DOCUMENTS | _AUDIO
RESPONSE_MEDIA_TYPES = frozenset({"image/png", "image/jpeg", "image/webp"}) | _DOCUMENTS
_DATA_FIELDS = ("text", "inlineData", "fileData", "functionCall", "functionResponse")
PARTS_UNSUPPORTED = (
    "Unable to submit request because `function_response.parts` is not supported for this "
    "model. Learn more: https://cloud.google.com/vertex-ai/generative-ai/docs/multimodal/"
    "function-calling"
)
_LEVELS = frozenset({"MINIMAL", "LOW", "MEDIUM", "HIGH"})
_PRO_LEVELS = (  # Gemini 3 Pro takes LOW and HIGH, 3.x Pro adds MEDIUM; Flash takes all four
    (re.compile(r"gemini-3-pro"), frozenset({"LOW", "HIGH"})),
    (re.compile(r"gemini-3\.\d+-pro"), frozenset({"LOW", "MEDIUM", "HIGH"})),
    # Gemini 2026 2: 3.7 and 3.8 Flash (3.7 routes to 3.8) take no MINIMAL, nor do later names
    (re.compile(r"gemini-(3\.([7-9]|\d{2,})|[4-9]|\d{2,})"), frozenset({"LOW", "MEDIUM", "HIGH"})),
)


def text(value: str, *, signed: bool | None = None) -> dict[str, Any]:
    """A text part (``signed=None``: the twin signs the last text of a reply without calls)."""
    return {"text": value, "_signed": signed}


def thought(value: str, *, signed: bool = False) -> dict[str, Any]:
    """A ``thought: true`` part (Gemini sends them when asked with ``includeThoughts``)."""
    return {"text": value, "thought": True, "_signed": signed}


def call(name: str, args: Mapping[str, Any], *, signed: bool | None = None) -> dict[str, Any]:
    """A ``functionCall`` part (``signed=None``: the first call of a reply is signed)."""
    return {"functionCall": {"name": name, "args": dict(args)}, "_signed": signed}


@dataclass
class Reply:
    """One scripted answer: parts and a finish, a blocked prompt, an error, or raw bytes."""

    parts: list[dict[str, Any]] = field(default_factory=list)
    finish: str = "STOP"
    finish_message: str | None = None
    block: str | None = None
    usage: dict[str, int] = field(
        default_factory=lambda: {"promptTokenCount": 10, "candidatesTokenCount": 5}
    )
    status: int = 200
    error: str | None = None
    raw: str | None = None
    grounding: Mapping[str, Any] | None = None  # the candidate's groundingMetadata (a search)

    @classmethod
    def failing(cls, status: int, message: str) -> Reply:
        """An HTTP error with Google's body (503 ``UNAVAILABLE``, ...)."""
        return cls(status=status, error=message)


@dataclass
class Received:
    """One request the twin accepted or refused."""

    model: str
    stream: bool
    body: dict[str, Any]
    status: int = 200


class GeminiTwin:
    """The twin's state: the script, the signatures it issued, and every request received."""

    def __init__(self, *replies: Reply, key: str = "twin-key", **require: Any) -> None:
        self.script = list(replies)
        self.key = key
        self.require_config: dict[str, Any] = require.pop("require_config", {})
        self.sign: str = require.pop("sign", "twin-sig-")
        """What the signatures begin with: another route's twin (Vertex) signs differently, so
        a signature replayed across routes is one this twin never issued (``Corrupted``)."""
        assert not require, f"unknown options {sorted(require)}"
        self.issued: dict[str, str] = {}  # signature -> the kind of part it was issued on
        self.built_in: set[str] = set()  # built-in tool parts served (gemini_builtin.key)
        self.signed_by: dict[str, str] = {}  # signature -> the model that issued it
        self.model = ""  # the model of the request being answered
        self.received: list[Received] = []

    def app(self) -> web.Application:
        """The aiohttp application (serve it with ``conftest.serve_app``)."""
        app = web.Application()
        app.router.add_post("/v1beta/models/{call}", self._handle)
        app.router.add_post("/v1beta/tunedModels/{call}", self._handle)  # a tuned model
        return app

    @property
    def accepted(self) -> list[Received]:
        """The requests the twin answered with 200."""
        return [r for r in self.received if r.status == 200]

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        model, _, method = request.match_info["call"].partition(":")
        stream = method == "streamGenerateContent"
        body = await request.json()
        record = Received(model, stream, body)
        self.received.append(record)
        if request.headers.get("x-goog-api-key") != self.key:
            record.status = 400
            return google_error(400, "API key not valid. Please pass a valid API key.")
        self.model = model
        problem = self.violation(model, body)
        if problem is not None:
            record.status = 400
            return google_error(400, problem)
        if not self.script:
            record.status = 500
            return google_error(500, "twin: the script is exhausted", "INTERNAL")
        reply = self.script.pop(0)
        record.status = reply.status
        if reply.error is not None:
            return google_error(reply.status, reply.error, "UNAVAILABLE")
        if stream:
            return await self._sse(request, reply)
        return web.json_response(self.json_reply(reply)) if reply.raw is None else raw(reply.raw)

    # -- rules --------------------------------------------------------------------------------

    def violation(self, model: str, body: Mapping[str, Any]) -> str | None:
        """Gemini's error text for the first rule ``body`` breaks, else None."""
        for name in body:
            if name not in _TOP_FIELDS:
                return f'Invalid JSON payload received. Unknown name "{name}": Cannot find field.'
        return (
            self._roles(body)
            or self._generation(model, body.get("generationConfig") or {})
            or self._signatures(model, body["contents"])
            or media_violation(model, body["contents"])
            or gemini_builtin.violation(model, body, self.built_in, is_gemini_3(model))
        )

    def _roles(self, body: Mapping[str, Any]) -> str | None:
        calls = 0
        for content in body["contents"]:
            if content.get("role") not in ("user", "model"):
                return "Please use a valid role: user, model."
            parts = content["parts"]
            responses = sum("functionResponse" in p for p in parts)
            if responses and responses != calls:
                return (
                    "Please ensure that the number of function response parts is equal to the "
                    "number of function call parts of the function call turn."
                )
            calls = sum("functionCall" in p for p in parts) if content["role"] == "model" else 0
        return None

    def _generation(self, model: str, config: Mapping[str, Any]) -> str | None:
        unknown = [k for k in config if k not in _GENERATION_FIELDS]
        thinking = config.get("thinkingConfig") or {}
        unknown += [k for k in thinking if k not in _THINKING_FIELDS]
        if unknown:
            return (
                f'Invalid JSON payload received. Unknown name "{unknown[0]}" at '
                "'generation_config': Cannot find field."
            )
        level, budget = thinking.get("thinkingLevel"), thinking.get("thinkingBudget")
        if level is not None and budget is not None:
            return "You can only set only one of thinking budget and thinking level."
        if level is not None and level not in levels_of(model):
            return "Thinking level is not supported for this model."
        if budget is not None and "2.5-pro" in model and not 128 <= budget <= 32_768:
            return f"The thinking budget ({budget}) is invalid."
        for key, value in self.require_config.items():
            if config.get(key) != value:
                return f"twin: generationConfig lost {key} (Gemini would ignore it silently)"
        return None

    def _signatures(self, model: str, contents: list[Mapping[str, Any]]) -> str | None:
        for position, content in enumerate(contents):
            first_call = True
            for part in content["parts"]:
                signature = part.get("thoughtSignature")
                if signature is not None and signature != BYPASS:
                    if self.issued.get(signature) != part_kind(part):
                        return CORRUPTED_SIGNATURE
                    if self.signed_by.get(signature, model) != model:
                        return INVALID_SIGNATURE
                if "functionCall" in part and first_call and content["role"] == "model":
                    first_call = False
                    if signature is None and is_gemini_3(model):
                        name = part["functionCall"]["name"]
                        return MISSING_SIGNATURE.format(name=name, position=position)
        return None

    # -- replies ------------------------------------------------------------------------------

    def _signed(self, reply: Reply) -> list[dict[str, Any]]:
        """The reply's parts with the twin's signatures (and the markers removed)."""
        parts = [dict(p) for p in reply.parts]
        calls = [p for p in parts if "functionCall" in p]
        texts = [p for p in parts if "text" in p and not p.get("thought")]
        auto = calls[:1] or texts[-1:]
        for part in parts:
            marker = part.pop("_signed", None)
            if marker or (marker is None and any(part is p for p in auto)):
                signature = f"{self.sign}{len(self.issued) + 1}"
                self.issued[signature] = part_kind(part)
                self.signed_by[signature] = self.model
                part["thoughtSignature"] = signature
        return parts

    def _candidate(self, parts: list[dict[str, Any]], finish: str | None, reply: Reply) -> Any:
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
        self.built_in.update(
            gemini_builtin.key(p) for p in parts if any(k in p for k in gemini_builtin.PART_KEYS)
        )
        if reply.grounding is not None:
            candidate["groundingMetadata"] = dict(reply.grounding)
        if finish is not None:
            candidate["finishReason"] = finish
            if reply.finish_message is not None:
                candidate["finishMessage"] = reply.finish_message
        return candidate

    def json_reply(self, reply: Reply) -> dict[str, Any]:
        """The whole ``generateContent`` body for ``reply``."""
        usage = {**reply.usage, "totalTokenCount": sum(reply.usage.values())}
        base = {"modelVersion": "twin-001", "responseId": f"resp{len(self.received)}"}
        if reply.block is not None:
            return {**base, "promptFeedback": {"blockReason": reply.block}, "usageMetadata": usage}
        candidate = self._candidate(self._signed(reply), reply.finish, reply)
        return {**base, "candidates": [candidate], "usageMetadata": usage}

    def chunks(self, reply: Reply) -> list[dict[str, Any]]:
        """The SSE chunks for ``reply``: texts split in two, a signed text's signature last."""
        whole = self.json_reply(reply)
        if reply.block is not None:
            return [whole]
        base = {k: whole[k] for k in ("modelVersion", "responseId")}
        pieces: list[dict[str, Any]] = []
        tail: list[dict[str, Any]] = []
        for part in whole["candidates"][0]["content"]["parts"]:
            if "text" in part and len(part["text"]) > 1:
                half = len(part["text"]) // 2
                first, second = dict(part), dict(part)
                first["text"], second["text"] = part["text"][:half], part["text"][half:]
                first.pop("thoughtSignature", None)
                if not part.get("thought") and "thoughtSignature" in part:
                    tail.append({"text": "", "thoughtSignature": second.pop("thoughtSignature")})
                pieces += [first, second]
            else:
                pieces.append(part)
        chunks = [{**base, "candidates": [self._candidate([p], None, reply)]} for p in pieces]
        last = self._candidate(tail, reply.finish, reply)
        chunks.append({**base, "candidates": [last], "usageMetadata": whole["usageMetadata"]})
        return chunks

    async def _sse(self, request: web.Request, reply: Reply) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        if reply.raw is not None:
            await response.write(reply.raw.encode())
        else:
            for chunk in self.chunks(reply):
                await response.write(f"data: {json.dumps(chunk)}\r\n\r\n".encode())
        await response.write_eof()
        return response


def media_violation(model: str, contents: list[Mapping[str, Any]]) -> str | None:
    """Gemini's text for the first media block that breaks rule 5, else None."""
    for i, content in enumerate(contents):
        for j, part in enumerate(content["parts"]):
            where = f"contents[{i}].parts[{j}]"
            held = [k for k in _DATA_FIELDS if k in part]
            if len(held) > 1:
                return (
                    f"Invalid value at '{where}' (oneof), oneof field 'data' is already set. "
                    f"Cannot set '{held[1]}'"
                )
            problem = _part_media(model, where, part)
            if problem is not None:
                return problem
    return None


def _part_media(model: str, where: str, part: Mapping[str, Any]) -> str | None:
    if "inlineData" in part:
        return _inline(where, part["inlineData"], MEDIA_TYPES)
    if "fileData" in part:
        return _file(part["fileData"])
    if "functionResponse" in part:
        return _response_parts(model, where, part["functionResponse"])
    return None


def _inline(where: str, blob: Mapping[str, Any], accepted: frozenset[str]) -> str | None:
    mime, data = blob.get("mimeType"), blob.get("data")
    if not mime:
        return "Unable to submit request because it has an empty mimeType parameter in inlineData."
    if not data:
        return "Unable to submit request because it has an empty data parameter in inlineData."
    try:
        base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return (
            f"Invalid value at '{where}.inline_data.data' (TYPE_BYTES), Base64 decoding failed "
            f'for "{data[:40]}"'
        )
    return None if mime in accepted else f"Unsupported MIME type: {mime}"


def _file(file: Mapping[str, Any]) -> str | None:
    uri, mime = file.get("fileUri"), file.get("mimeType")
    if not uri:
        return "Unable to submit request because it has an empty fileUri parameter in fileData."
    if not mime and not str(uri).startswith("https://generativelanguage.googleapis.com/"):
        return (
            "Unable to submit request because it has an empty mimeType parameter in fileData. "
            "Add a value to the parameter and try again."
        )
    return None if not mime or mime in MEDIA_TYPES else f"Unsupported MIME type: {mime}"


def _response_parts(model: str, where: str, response: Mapping[str, Any]) -> str | None:
    parts = response.get("parts")
    if parts is None:
        return None
    if not is_gemini_3(model):
        return PARTS_UNSUPPORTED
    for k, part in enumerate(parts):
        inner = f"{where}.function_response.parts[{k}]"
        unknown = [name for name in part if name != "inlineData"]
        if unknown:
            return (
                f"Invalid JSON payload received. Unknown name \"{unknown[0]}\" at '{inner}': "
                "Cannot find field."
            )
        problem = _inline(inner, part.get("inlineData", {}), RESPONSE_MEDIA_TYPES)
        if problem is not None:
            return problem
    return None


def part_kind(part: Mapping[str, Any]) -> str:
    """What a signature was issued on: ``call:<name>``, ``thought`` or ``text``."""
    if "functionCall" in part:
        return f"call:{part['functionCall']['name']}"
    return "thought" if part.get("thought") else "text"


def is_gemini_3(model: str) -> bool:
    """Gemini 3 and later validate thought signatures and take ``thinkingLevel``."""
    return re.match(r"gemini-[3-9]", model) is not None


def levels_of(model: str) -> frozenset[str]:
    """The ``thinkingLevel`` values ``model`` takes (none before Gemini 3)."""
    if not is_gemini_3(model):
        return frozenset()
    return next((levels for name, levels in _PRO_LEVELS if name.match(model)), _LEVELS)


def google_error(status: int, message: str, code: str = "INVALID_ARGUMENT") -> web.Response:
    """Google's error body."""
    body = {"error": {"code": status, "message": message, "status": code}}
    return web.json_response(body, status=status)


def raw(body: str) -> web.Response:
    """Recorded bytes, replayed as they are."""
    return web.Response(body=body.encode(), content_type="application/json")
