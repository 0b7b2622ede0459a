"""A twin of the Anthropic Messages API: a local server that keeps the provider's documented rules.

``AnthropicTwin`` serves ``POST /v1/messages`` on 127.0.0.1 (one JSON reply, or SSE when the body
says ``"stream": true``) from a script of replies, and answers every request that breaks a rule of
``shared/spec/provider-rules.md`` (Anthropic) the way the API does: HTTP 400 with an
``invalid_request_error`` body carrying the API's own message text. Rules enforced (numbers are
the rules file's):

1. With ``thinking`` enabled, the final assistant message holding ``tool_use`` starts with its
   ``thinking`` / ``redacted_thinking`` blocks. Every thinking block sent must carry a signature
   this twin issued, with the very text it was issued for (a redacted block, data it issued):
   the twin signs what it serves, so a client that drops, reorders, edits or invents reasoning is
   caught ("preserved thinking" included). Thinking off, a final assistant message may not hold
   thinking.
3. Thinking with ``temperature`` other than 1, with ``top_k``, or with a forced ``tool_choice``
   (``any``/``tool``); a budget under 1024 or not below ``max_tokens``; and on Claude 4.5 and
   later ``temperature`` with ``top_p``.
4. ``max_tokens`` is required.
5. Media (``anthropic_media``): ``image`` and ``document`` blocks in user messages and inside
   ``tool_result`` content, each source checked field by field (types, base64, the bytes against
   the media type, 5 MiB of base64 per image); no audio, no media from the assistant, no empty
   text block. A body over 32 MiB is 413 ``request_too_large``.
6. At most four ``cache_control`` breakpoints (tools, system, message blocks, blocks inside
   tool results).

And "Anthropic, late 2026" 7: ``thinking: {"type": "enabled"}`` on Claude 4.7 and later (Opus
4.7/4.8, Sonnet 5, Fable, Mythos, every 5.x and later name) is a 400; ``{"type": "adaptive"}``
before Claude 4.6 is a 400; ``output_config.effort`` outside low|medium|high|xhigh|max is a 400.
Adaptive thinking is held to rule 3 like enabled thinking (no budget to check). Rules 1 and 6
of that part (thinking bound to its prefix on an append-only model, mid-conversation system
messages and tool changes) are in ``anthropic_prefix``.

Replies: ``TwinReply(blocks, stop_reason)`` built from ``thinking()``, ``redacted()``, ``text()``,
``tool_use()`` and ``cut_tool_use()`` (a tool block left open by a cut: the stream never closes
it; the JSON body carries the partial input as a string), or ``TwinReply.fixture(path)``, which
replays a recorded SSE body byte for byte (as JSON, the message it streams) and registers the
signatures in it. A callable step gets the request body and returns the reply. ``requests`` keeps
every accepted request body, ``rejected`` every rule violation's message.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

from aiohttp import web

from . import anthropic_prefix as prefix
from .anthropic_media import (
    MAX_REQUEST_BYTES,
    REQUEST_TOO_LARGE,
    media_violation,
    nested_breakpoints,
)
from .anthropic_server_tools import ServerBlocks
from .anthropic_tool_search import search_violation
from .anthropic_tools import tool_violation

DOCS = "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
CONSIDERATIONS = f"{DOCS}#important-considerations-when-using-extended-thinking"
MUST_START = (
    "messages.{i}.content.0.type: Expected `thinking` or `redacted_thinking`, but found `{found}`."
    " When `thinking` is enabled, a final `assistant` message must start with a thinking block"
    " (preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend you"
    " include thinking blocks from previous turns. To avoid this requirement, disable `thinking`."
    f" Please consult our documentation at {DOCS}"
)
BAD_SIGNATURE = "messages.{i}.content.{j}: Invalid `signature` in `thinking` block"
NO_SIGNATURE = "messages.{i}.content.{j}.thinking.signature: Field required"
THINKING_OFF = (
    "messages.{i}.content.{j}: When thinking is disabled, an `assistant` message in the final"
    " position cannot contain `thinking`. To use thinking blocks, enable `thinking` in your"
    " request."
)
TEMPERATURE = (
    "`temperature` may only be set to 1 when thinking is enabled. "
    f"Please consult our documentation at {CONSIDERATIONS}"
)
TOP_K = f"`top_k` must be unset when thinking is enabled. Please consult our documentation at {CONSIDERATIONS}"  # noqa: E501
FORCED_TOOL = "Thinking may not be enabled when tool_choice forces tool use."
SMALL_BUDGET = "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
BUDGET_OVER_MAX = (
    "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our documentation"
    f" at {DOCS}#max-tokens-and-context-window-size"
)
TEMPERATURE_AND_TOP_P = (
    "`temperature` and `top_p` cannot both be specified for this model. Please use only one."
)
MAX_TOKENS_REQUIRED = "max_tokens: Field required"
CACHE_BREAKPOINTS = "A maximum of 4 blocks with cache_control may be provided. Found {n}."

ENABLED_REJECTED = (  # provider-rules Anthropic 2026 7 (wording approximated from reports)
    "thinking.type.enabled is not supported for this model. Use thinking.type.adaptive and "
    "output_config.effort to control thinking behavior."
)
ADAPTIVE_UNKNOWN = (
    "thinking: Input tag 'adaptive' found using 'type' does not match any of the expected tags: "
    "'disabled', 'enabled'"
)
BAD_EFFORT = "output_config.effort: Input should be 'low', 'medium', 'high', 'xhigh' or 'max'"

_NEW_SAMPLING = re.compile(r"claude-(sonnet|haiku|opus)-(4-[5-9]|[5-9])")
_ADAPTIVE_ONLY = re.compile(
    r"claude-((opus|sonnet|haiku)-4-([7-9])|(opus|sonnet|haiku|fable|mythos)-([5-9]|\d{2,}))"
)
"""Claude 4.7 and later: adaptive thinking only (``enabled`` is a 400)."""
_ADAPTIVE = re.compile(r"claude-(opus|sonnet|haiku)-4-6")
"""Claude 4.6 takes both (``enabled`` deprecated); earlier models only ``enabled``."""
_EFFORTS = ("low", "medium", "high", "xhigh", "max")
_THINKING_KINDS = ("thinking", "redacted_thinking")


# --- replies ----------------------------------------------------------------------------------


def thinking(text: str) -> dict[str, Any]:
    """A thinking block; the twin signs it when it serves it."""
    return {"type": "thinking", "thinking": text}


def redacted() -> dict[str, Any]:
    """A redacted_thinking block; the twin issues its data when it serves it."""
    return {"type": "redacted_thinking"}


def text(value: str) -> dict[str, Any]:
    """A text block."""
    return {"type": "text", "text": value}


def tool_use(name: str, arguments: Mapping[str, Any], call_id: str | None = None) -> dict[str, Any]:
    """A tool_use block (an id is made up when not given)."""
    return {"type": "tool_use", "id": call_id, "name": name, "input": dict(arguments)}


def cut_tool_use(name: str, partial_json: str) -> dict[str, Any]:
    """A tool_use block cut at the output limit: never closed, its input JSON unfinished."""
    return {"type": "tool_use", "id": None, "name": name, "partial": partial_json}


@dataclass(frozen=True)
class TwinReply:
    """One scripted reply: content blocks (wire form) and the stop reason."""

    blocks: Sequence[dict[str, Any]] = ()
    stop_reason: str = "end_turn"
    fixture: Path | None = None

    @classmethod
    def from_fixture(cls, path: Path) -> TwinReply:
        """A recorded SSE body, replayed byte for byte (as JSON: the message it streams)."""
        return cls(fixture=path)


Step = TwinReply | Callable[[Mapping[str, Any]], TwinReply]


# --- the rules --------------------------------------------------------------------------------


@dataclass
class Issued:
    """What the twin signed: signature -> thinking text, and redacted data."""

    signatures: dict[str, str] = field(default_factory=dict)
    redacted: set[str] = field(default_factory=set)

    def sign(self, thought: str) -> str:
        digest = hashlib.sha256(thought.encode()).hexdigest()[:24]
        signature = f"twin-sig-{len(self.signatures)}-{digest}"
        self.signatures[signature] = thought
        return signature

    def redact(self) -> str:
        data = f"twin-redacted-{len(self.redacted)}"
        self.redacted.add(data)
        return data


def _blocks(body: Mapping[str, Any]) -> Iterator[tuple[int, int, str, Mapping[str, Any]]]:
    for i, message in enumerate(body.get("messages") or []):
        content = message.get("content")
        if isinstance(content, list):
            for j, block in enumerate(content):
                yield i, j, str(message.get("role")), block


def _thinking_blocks(body: Mapping[str, Any], issued: Issued, on: bool) -> str | None:
    """Rule 1: every reasoning block is one the twin issued, unchanged."""
    messages = body.get("messages") or []
    for i, j, role, block in _blocks(body):
        if role != "assistant" or block.get("type") not in _THINKING_KINDS:
            continue
        if not on and i == len(messages) - 1:
            return THINKING_OFF.format(i=i, j=j)
        if block["type"] == "redacted_thinking":
            if block.get("data") not in issued.redacted:
                return BAD_SIGNATURE.format(i=i, j=j)
            continue
        signature = block.get("signature")
        if not signature:
            return NO_SIGNATURE.format(i=i, j=j)
        if issued.signatures.get(signature) != block.get("thinking"):
            return BAD_SIGNATURE.format(i=i, j=j)
    return None


def _starts_with_thinking(body: Mapping[str, Any]) -> str | None:
    """Rule 1: the final assistant message holding tool_use starts with its thinking."""
    messages = body.get("messages") or []
    last = max((i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=None)
    if last is None or not isinstance(messages[last].get("content"), list):
        return None
    content = messages[last]["content"]
    if any(b.get("type") == "tool_use" for b in content):
        first = content[0].get("type")
        if first not in _THINKING_KINDS:
            return MUST_START.format(i=last, found=first)
    return None


def _thinking_kind(body: Mapping[str, Any], kind: object) -> str | None:
    """Anthropic 2026 rule 7: ``enabled`` refused from 4.7, ``adaptive`` from 4.6 only."""
    model = str(body.get("model"))
    new = _ADAPTIVE_ONLY.match(model) is not None
    if kind == "enabled" and new:
        return ENABLED_REJECTED
    if kind == "adaptive" and not (new or _ADAPTIVE.match(model)):
        return ADAPTIVE_UNKNOWN
    effort = (body.get("output_config") or {}).get("effort")
    if effort is not None and effort not in _EFFORTS:
        return BAD_EFFORT
    return None


def _thinking_settings(body: Mapping[str, Any], config: Mapping[str, Any]) -> str | None:
    """Rule 3: what thinking cannot be combined with."""
    if config.get("type") == "enabled":
        budget = config.get("budget_tokens")
        if not isinstance(budget, int) or budget < 1024:
            return SMALL_BUDGET
        if budget >= body["max_tokens"]:
            return BUDGET_OVER_MAX
    if body.get("temperature", 1) != 1:
        return TEMPERATURE
    if "top_k" in body:
        return TOP_K
    choice = body.get("tool_choice")
    if isinstance(choice, Mapping) and choice.get("type") in ("any", "tool"):
        return FORCED_TOOL
    return None


def breakpoints(body: Mapping[str, Any]) -> int:
    """Rule 6: how many blocks carry ``cache_control``."""
    count = sum("cache_control" in tool for tool in body.get("tools") or [])
    system = body.get("system")
    if isinstance(system, list):
        count += sum("cache_control" in block for block in system)
    count += sum("cache_control" in block for *_, block in _blocks(body))
    return count + nested_breakpoints(body)


def violation(body: Mapping[str, Any], issued: Issued) -> str | None:
    """The API's message for the first rule ``body`` breaks, or None."""
    if "max_tokens" not in body:
        return MAX_TOKENS_REQUIRED
    media = media_violation(body)
    if media:
        return media
    config = body.get("thinking")
    kind = config.get("type") if isinstance(config, Mapping) else None
    adaptive = _thinking_kind(body, kind)
    if adaptive is not None:
        return adaptive
    on = kind in ("enabled", "adaptive")
    if on:
        assert isinstance(config, Mapping)
        found = _thinking_settings(body, config)
        if kind == "enabled":  # an adaptive turn may not have thought (SPEC 28): no such rule
            found = found or _starts_with_thinking(body)
        if found:
            return found
    if _NEW_SAMPLING.match(str(body.get("model"))) and "temperature" in body and "top_p" in body:
        return TEMPERATURE_AND_TOP_P
    marked = breakpoints(body)
    if marked > 4:
        return CACHE_BREAKPOINTS.format(n=marked)
    return _thinking_blocks(body, issued, on)


# --- serving ----------------------------------------------------------------------------------


def _pieces(value: str, size: int = 7) -> list[str]:
    return [value[i : i + size] for i in range(0, len(value), size)] or [""]


def _sse(kind: str, data: Mapping[str, Any]) -> bytes:
    return f"event: {kind}\ndata: {json.dumps(data)}\n\n".encode()


class _Served:
    """One scripted reply made concrete: signatures issued, ids given."""

    def __init__(self, reply: TwinReply, issued: Issued, number: int) -> None:
        self.reply = reply
        self.dropped: list[Any] = []  # what drop_block dropped from the request (rule 3)
        self.blocks: list[dict[str, Any]] = []
        for k, block in enumerate(reply.blocks):
            block = dict(block)
            if block["type"] == "thinking":
                block["signature"] = issued.sign(block["thinking"])
            elif block["type"] == "redacted_thinking":
                block["data"] = issued.redact()
            elif block["type"] == "tool_use" and not block.get("id"):
                block["id"] = f"toolu_twin_{number}_{k}"
            self.blocks.append(block)

    def usage(self) -> dict[str, Any]:
        usage: dict[str, Any] = {"input_tokens": 20, "output_tokens": 10}
        searches = sum(b.get("name") == "web_search" for b in self.blocks
                       if b["type"] == "server_tool_use")  # fmt: skip
        if searches:
            usage["server_tool_use"] = {"web_search_requests": searches}
        return usage

    def json(self, model: str, ident: str) -> dict[str, Any]:
        content = []
        for block in self.blocks:
            if "partial" in block:
                block = {**block, "input": block["partial"]}
                del block["partial"]
            content.append(block)
        return {"id": ident, "type": "message", "role": "assistant", "model": model,
                "content": content, "stop_reason": self.reply.stop_reason, "stop_sequence": None,
                "usage": self.usage(),
                **({"input_transformations": self.dropped} if self.dropped else {})}  # fmt: skip

    def events(self, model: str, ident: str) -> Iterator[bytes]:
        start = {**self.json(model, ident), "content": [], "stop_reason": None}
        yield _sse("message_start", {"type": "message_start", "message": start})
        for index, block in enumerate(self.blocks):
            yield from _block_events(index, block)
        delta = {"stop_reason": self.reply.stop_reason, "stop_sequence": None}
        usage = {k: v for k, v in self.usage().items() if k != "input_tokens"}
        yield _sse("message_delta", {"type": "message_delta", "delta": delta, "usage": usage})
        yield _sse("message_stop", {"type": "message_stop"})


def _block_events(index: int, block: Mapping[str, Any]) -> Iterator[bytes]:
    kind = block["type"]
    head: dict[str, Any]
    deltas: list[dict[str, Any]] = []
    if kind == "thinking":
        head = {"type": "thinking", "thinking": "", "signature": ""}
        deltas = [{"type": "thinking_delta", "thinking": p} for p in _pieces(block["thinking"])]
        deltas.append({"type": "signature_delta", "signature": block["signature"]})
    elif kind == "text":
        head = {"type": "text", "text": ""}
        deltas = [{"type": "citations_delta", "citation": c} for c in block.get("citations", ())]
        deltas += [{"type": "text_delta", "text": p} for p in _pieces(block["text"])]
    elif kind in ("tool_use", "server_tool_use"):
        head = {"type": kind, "id": block["id"], "name": block["name"], "input": {}}
        raw = block["partial"] if "partial" in block else json.dumps(block["input"])
        deltas = [{"type": "input_json_delta", "partial_json": p} for p in _pieces(raw)]
    else:
        head = dict(block)
    yield _sse("content_block_start",
               {"type": "content_block_start", "index": index, "content_block": head})  # fmt: skip
    for delta in deltas:
        yield _sse("content_block_delta",
                   {"type": "content_block_delta", "index": index, "delta": delta})  # fmt: skip
    if "partial" not in block:  # a cut block is never closed
        yield _sse("content_block_stop", {"type": "content_block_stop", "index": index})


def fixture_message(raw: str, issued: Issued) -> dict[str, Any]:
    """The message a recorded SSE body streams; its thinking signatures become issued ones."""
    message: dict[str, Any] = {}
    blocks: dict[int, dict[str, Any]] = {}
    for line in raw.splitlines():
        if not line.startswith("data:"):
            continue
        data = json.loads(line[5:])
        kind = data.get("type")
        if kind == "message_start":
            message = dict(data["message"])
        elif kind == "content_block_start":
            blocks[data["index"]] = dict(data["content_block"], _json="")
        elif kind == "content_block_delta":
            _apply(blocks[data["index"]], data["delta"])
        elif kind == "message_delta":
            message.update(data["delta"])
    message["content"] = [_finished(blocks[i], issued) for i in sorted(blocks)]
    return message


def _finished(block: dict[str, Any], issued: Issued) -> dict[str, Any]:
    """A streamed block as the JSON body holds it (a cut tool input stays a string)."""
    raw_input = block.pop("_json")
    if block["type"] in ("tool_use", "server_tool_use") and raw_input:
        try:
            block["input"] = json.loads(raw_input)
        except ValueError:
            block["input"] = raw_input
    if block["type"] == "thinking" and block.get("signature"):
        issued.signatures[block["signature"]] = block["thinking"]
    elif block["type"] == "redacted_thinking" and block.get("data"):
        issued.redacted.add(block["data"])
    return block


def _apply(block: dict[str, Any], delta: Mapping[str, Any]) -> None:
    kind = delta.get("type")
    if kind == "text_delta":
        block["text"] = block.get("text", "") + delta["text"]
    elif kind == "thinking_delta":
        block["thinking"] = block.get("thinking", "") + delta["thinking"]
    elif kind == "signature_delta":
        block["signature"] = block.get("signature", "") + delta["signature"]
    elif kind == "input_json_delta":
        block["_json"] += delta["partial_json"]


def _error(status: int, kind: str, message: str, request_id: str) -> web.Response:
    body = {"type": "error", "error": {"type": kind, "message": message}, "request_id": request_id}
    return web.json_response(body, status=status, headers={"request-id": request_id})


class AnthropicTwin:
    """The twin server: ``async with AnthropicTwin(script) as twin:`` then ``twin.url``."""

    def __init__(self, script: Sequence[Step] = ()) -> None:
        self.script = list(script)
        self.issued = Issued()
        self.binder = prefix.Binder()
        self.dropped: list[Any] = []  # what the last request's drop_block dropped
        self.requests: list[dict[str, Any]] = []
        self.rejected: list[str] = []
        self.server = ServerBlocks()
        self.url = ""
        self._runner: web.AppRunner | None = None

    async def __aenter__(self) -> Self:
        app = web.Application(client_max_size=2 * MAX_REQUEST_BYTES)
        app.router.add_post("/v1/messages", self._handle)
        self._runner = web.AppRunner(app, shutdown_timeout=0.1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        number = len(self.requests) + len(self.rejected)
        request_id = f"req_twin_{number}"
        if not request.headers.get("x-api-key"):
            return _error(401, "authentication_error", "x-api-key header is required", request_id)
        if (request.content_length or 0) > MAX_REQUEST_BYTES:
            self.rejected.append(REQUEST_TOO_LARGE)
            return _error(413, "request_too_large", REQUEST_TOO_LARGE, request_id)
        body = await request.json()
        return await self.serve(request, body, request.headers.get("anthropic-beta", ""), number)

    async def serve(
        self,
        request: web.Request,
        body: Mapping[str, Any],
        beta: str,
        number: int,
        sent: Mapping[str, Any] | None = None,
    ) -> web.StreamResponse:
        """Check ``body`` (``beta``: the betas it asked for, comma-separated) and answer it.

        Another front (the Vertex twin, whose betas travel in the body) serves Claude here,
        ``body`` as the Messages API would see it, ``sent`` the body as sent (kept in
        ``requests``).
        """
        request_id = f"req_twin_{number}"
        betas = prefix.betas_of({"anthropic-beta": beta})
        problem = (
            violation(body, self.issued)
            or tool_violation(body, {"anthropic-beta": beta})
            or self.server.violation(body, beta)
            or search_violation(body)
            or prefix.conversation_rules(body, betas)
        )
        if problem is None:
            problem, self.dropped = self.binder.check(body, betas)
        if problem is not None:
            self.rejected.append(problem)
            return _error(400, "invalid_request_error", problem, request_id)
        self.requests.append(dict(body if sent is None else sent))
        if not self.script:
            return _error(500, "api_error", "the twin's script is exhausted", request_id)
        step = self.script.pop(0)
        reply = step if isinstance(step, TwinReply) else step(body)
        return await self._answer(request, body, reply, number)

    async def _answer(
        self, request: web.Request, body: Mapping[str, Any], reply: TwinReply, number: int
    ) -> web.StreamResponse:
        ident, model = f"msg_twin_{number}", str(body.get("model"))
        if reply.fixture is not None:
            raw = reply.fixture.read_text()
            message = fixture_message(raw, self.issued)
            if not body.get("stream"):
                return web.json_response(message)
            chunks: Iterator[bytes] = iter([raw.encode()])
        else:
            served = _Served(reply, self.issued, number)
            served.dropped = self.dropped
            self.binder.bind(body, served.blocks)
            self.server.issue(served.blocks, reply.stop_reason)
            if not body.get("stream"):
                return web.json_response(served.json(model, ident))
            chunks = served.events(model, ident)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for chunk in chunks:
            await response.write(chunk)
        await response.write_eof()
        return response
