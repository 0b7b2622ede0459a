"""A twin of OpenAI's ``/v1/chat/completions``: the rules current models enforce, in OpenAI's words.

``OpenAIChatTwin`` is an aiohttp app (serve it with ``tests/providers/conftest.serve_app``) that
answers JSON or SSE (``stream: true``) from a script of steps, after checking every request
against the OpenAI rules of ``shared/spec/provider-rules.md`` with OpenAI's status, error JSON
shape (``{"error": {"message", "type", "param", "code"}}``) and text. Its idea of a model family
is its own, written from OpenAI's docs and reports, not read from ``agentloop.providers.profiles``:
a twin that shared the adapter's table would agree with any mistake in it.

Rules (numbered as in provider-rules.md, OpenAI):

1. Reasoning models (o-series, gpt-5 family but ``gpt-5-chat``) answer 400 to ``max_tokens``
   ("Unsupported parameter: 'max_tokens' is not supported with this model. Use
   'max_completion_tokens' instead."), a ``temperature`` other than 1 (``unsupported_value``),
   ``top_p`` and ``stop`` (``unsupported_parameter``), and a ``reasoning_effort`` the family does
   not take; other models answer 400 to any ``reasoning_effort``.
2. Responses-only models (``gpt-5-pro``, ``o3-pro``, ``*codex*``, ``*deep-research*``) answer
   404 "This model is only supported in v1/responses and not in v1/chat/completions.";
   *reported*: gpt-5.5 and later
   refuse function tools unless ``reasoning_effort`` is ``"none"`` (their default effort counts),
   gpt-5.2 to 5.4 refuse them beside an explicit effort other than ``"none"``.
4. Refusals: a step may refuse (``TwinReply(refusal=...)``), be filtered
   (``finish_reason="content_filter"``), or replay a recorded stream (``Replay(path)``).
5. A schema sent ``strict: true`` (a function's ``parameters`` or ``response_format``) must list
   every property in ``required`` and carry ``additionalProperties: false`` on every object, and
   use no keyword strict mode refuses; else 400 "Invalid schema for function 'x': In
   context=(...), ...".
6. Every reply's usage carries ``prompt_tokens_details.cached_tokens`` and
   ``completion_tokens_details.reasoning_tokens``.
7. Media (``openai_chat_media``): image, file and audio parts in user content only, each of the
   exact shape and content OpenAI checks (data URLs, MIME types, base64, audio formats), and only
   on a model that reads that kind.

And the transcript rules every Chat Completions model enforces: an assistant message with
``tool_calls`` is followed by one ``tool`` message per call id, a ``tool`` message answers a
call, and a message carries only the fields the API defines (reasoning has none: "Additional
properties are not allowed ('reasoning' was unexpected)").

``requests`` holds every body received (refused ones too), ``accepted`` the ones that passed,
``paths`` the URL path of each request.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeAlias

from aiohttp import web

from .openai_chat_media import check_content

RESPONSES_ONLY_TEXT = "This model is only supported in v1/responses and not in v1/chat/completions."
MAX_TOKENS_TEXT = (
    "Unsupported parameter: 'max_tokens' is not supported with this model. "
    "Use 'max_completion_tokens' instead."
)
TOOLS_EFFORT_TEXT = (
    "Function tools with reasoning_effort are not supported for {model} in /v1/chat/completions. "
    "To use function tools, use /v1/responses or set reasoning_effort to 'none'."
)

_RESPONSES_ONLY = re.compile(r"gpt-5(\.\d+)?-pro.*|o\d+-pro.*|.*codex.*|.*deep-research.*")
_REASONING = re.compile(r"o\d.*|gpt-5.*|gpt-([6-9]|\d{2,}).*")
_DOTTED = re.compile(r"gpt-(\d+)\.(\d+)")
_MESSAGE_FIELDS: Mapping[str, frozenset[str]] = {
    "system": frozenset({"role", "content", "name"}),
    "developer": frozenset({"role", "content", "name"}),
    "user": frozenset({"role", "content", "name"}),
    "assistant": frozenset(
        {"role", "content", "name", "tool_calls", "refusal", "audio", "function_call"}
    ),
    "tool": frozenset({"role", "content", "tool_call_id"}),
}
_STRICT_REFUSED = (
    "minLength",
    "maxLength",
    "oneOf",
    "allOf",
    "not",
    "if",
    "then",
    "else",
    "patternProperties",
    "default",
)


@dataclass(frozen=True)
class TwinReply:
    """One scripted answer, sent as a chat completion or as a stream of chunks.

    ``tool_calls`` are ``(name, arguments)`` with the arguments as JSON text sent verbatim (cut
    text included) or an object to encode; ``finish_reason`` None means ``tool_calls`` when there
    are calls, else ``stop``. ``complete=False`` ends a stream before ``[DONE]``.
    """

    text: str = ""
    tool_calls: Sequence[tuple[str, str | Mapping[str, Any]]] = ()
    finish_reason: str | None = None
    refusal: str | None = None
    prompt_tokens: int = 20
    completion_tokens: int = 8
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    complete: bool = True


@dataclass(frozen=True)
class Replay:
    """A recorded SSE body (``shared/fixtures``) replayed byte for byte, in odd-sized writes."""

    path: Path


Step: TypeAlias = TwinReply | Replay | Callable[[Mapping[str, Any]], "TwinReply | Replay"]


class Refused(Exception):
    """Internal: a request broke a rule; carries OpenAI's status and error object."""

    def __init__(
        self, status: int, message: str, param: str | None, code: str | None, kind: str
    ) -> None:
        super().__init__(message)
        self.status = status
        self.error = {"message": message, "type": kind, "param": param, "code": code}


def _bad(message: str, param: str | None, code: str | None = None) -> Refused:
    return Refused(400, message, param, code, "invalid_request_error")


@dataclass
class OpenAIChatTwin:
    """The twin: a script of steps, what it received, and its aiohttp app."""

    script: list[Step] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    accepted: list[dict[str, Any]] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)

    def push(self, *steps: Step) -> None:
        """Add steps to the script."""
        self.script.extend(steps)

    def app(self) -> web.Application:
        """The aiohttp app: ``POST .../chat/completions`` under any prefix (Azure-like too)."""
        app = web.Application()
        app.router.add_route("POST", "/{path:.*}", self._handle)
        return app

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.paths.append(request.path)
        if not request.path.endswith("/chat/completions"):
            return _error(
                404, f"Invalid URL (POST {request.path})", None, None, "invalid_request_error"
            )
        body = await request.json()
        self.requests.append(body)
        try:
            check_request(body)
        except Refused as refused:
            return web.json_response({"error": refused.error}, status=refused.status)
        self.accepted.append(body)
        if not self.script:
            return _error(500, "twin: the script is exhausted", None, None, "server_error")
        step = self.script.pop(0)
        if callable(step):
            step = step(body)
        model = str(body["model"])
        if isinstance(step, Replay):
            return await _replay(request, step.path)
        if body.get("stream"):
            return await _stream(request, step, model, bool(body.get("stream_options")))
        return web.json_response(_completion(step, model))


def _error(
    status: int, message: str, param: str | None, code: str | None, kind: str
) -> web.Response:
    error = {"message": message, "type": kind, "param": param, "code": code}
    return web.json_response({"error": error}, status=status)


# --- the rules --------------------------------------------------------------------------------


def check_request(body: Mapping[str, Any]) -> None:
    """Raise ``Refused`` for the first rule ``body`` breaks (model, parameters, then the body)."""
    model = str(body.get("model", "")).lower().rpartition("/")[2]
    if _RESPONSES_ONLY.fullmatch(model):
        raise Refused(404, RESPONSES_ONLY_TEXT, "model", None, "invalid_request_error")
    if _REASONING.fullmatch(model) and not model.startswith("gpt-5-chat"):
        _check_reasoning_params(body)
    elif "reasoning_effort" in body:
        raise _bad(
            "Unsupported parameter: 'reasoning_effort' is not supported with this model.",
            "reasoning_effort",
            "unsupported_parameter",
        )
    _check_tools_effort(model, body)
    _check_messages(body.get("messages"), model)
    _check_strict(body)


def _efforts(model: str) -> tuple[str, ...]:
    """OpenAI 2026 2-3: 5.1 none..high; 5.2+ and gpt-6 add xhigh; sol models add max."""
    if re.fullmatch(r"gpt-(5\.6|[6-9](\.\d+)?)-sol.*", model):
        return ("none", "low", "medium", "high", "xhigh", "max")
    if model.startswith("gpt-5.1"):
        return ("none", "low", "medium", "high")
    if model.startswith("gpt-5.") or re.match(r"gpt-([6-9]|\d{2,})", model):
        return ("none", "low", "medium", "high", "xhigh")
    if model.startswith("gpt-5"):
        return ("minimal", "low", "medium", "high")
    return ("low", "medium", "high")


def _check_reasoning_params(body: Mapping[str, Any]) -> None:
    if "max_tokens" in body:
        raise _bad(MAX_TOKENS_TEXT, "max_tokens", "unsupported_parameter")
    temperature = body.get("temperature")
    if temperature is not None and temperature != 1:
        raise _bad(
            f"Unsupported value: 'temperature' does not support {temperature} with this model. "
            "Only the default (1) value is supported.",
            "temperature",
            "unsupported_value",
        )
    for name in ("top_p", "stop"):
        if name in body:
            raise _bad(
                f"Unsupported parameter: '{name}' is not supported with this model.",
                name,
                "unsupported_parameter",
            )
    effort = body.get("reasoning_effort")
    accepted = _efforts(str(body["model"]).lower().rpartition("/")[2])
    if effort is not None and effort not in accepted:
        listed = ", ".join(f"'{e}'" for e in accepted[:-1]) + f", and '{accepted[-1]}'"
        raise _bad(
            f"Unsupported value: 'reasoning_effort' does not support {effort!r} with this "
            f"model. Supported values are: {listed}.",
            "reasoning_effort",
            "unsupported_value",
        )


def _check_tools_effort(model: str, body: Mapping[str, Any]) -> None:
    match = _DOTTED.match(model)
    if match is None or not body.get("tools"):
        return
    version = (int(match[1]), int(match[2]))
    effort = body.get("reasoning_effort")
    if effort == "none" or version < (5, 2) or (effort is None and version < (5, 5)):
        return
    raise _bad(TOOLS_EFFORT_TEXT.format(model=model), "reasoning_effort")


def _check_messages(messages: object, model: str) -> None:
    if not isinstance(messages, list) or not messages:
        raise _bad("[] is too short - 'messages'", "messages", "empty_array")
    waiting: list[str] = []
    for index, message in enumerate(messages):
        role = message.get("role")
        allowed = _MESSAGE_FIELDS.get(role)
        if allowed is None:
            raise _bad(f"Invalid value: '{role}'.", f"messages.[{index}].role", "invalid_value")
        extra = sorted(set(message) - allowed)
        if extra:
            raise _bad(
                f"Additional properties are not allowed ('{extra[0]}' was unexpected) - "
                f"'messages.{index}'",
                f"messages.[{index}]",
            )
        waiting = _check_tool_order(index, message, waiting)
        check_content(index, message, model, _bad)
    if waiting:
        raise _unanswered(len(messages) - 1, waiting)


def _check_tool_order(index: int, message: Mapping[str, Any], waiting: list[str]) -> list[str]:
    """The call ids still waiting for a ``tool`` message after ``message``."""
    if message["role"] == "tool":
        call_id = message.get("tool_call_id")
        if call_id not in waiting:
            raise _bad(
                "Invalid parameter: messages with role 'tool' must be a response to a "
                "preceeding message with 'tool_calls'.",
                f"messages.[{index}].role",
            )
        if not isinstance(message.get("content"), str | list):
            raise _bad(f"Invalid type for 'messages[{index}].content'.", f"messages.[{index}]")
        return [c for c in waiting if c != call_id]
    if waiting:
        raise _unanswered(index - 1, waiting)
    calls = message.get("tool_calls") or []
    return [str(call["id"]) for call in calls]


def _unanswered(index: int, waiting: list[str]) -> Refused:
    return _bad(
        "An assistant message with 'tool_calls' must be followed by tool messages responding "
        "to each 'tool_call_id'. The following tool_call_ids did not have response messages: "
        + ", ".join(waiting),
        f"messages.[{index}].role",
    )


def _check_strict(body: Mapping[str, Any]) -> None:
    for index, tool in enumerate(body.get("tools") or []):
        function = tool["function"]
        if function.get("strict"):
            where = f"Invalid schema for function '{function['name']}'"
            check_schema(function["parameters"], (), where, f"tools[{index}].function.parameters")
    response_format = body.get("response_format") or {}
    spec = response_format.get("json_schema") or {}
    if spec.get("strict"):
        where = f"Invalid schema for response_format '{spec['name']}'"
        schema = spec["schema"]
        if schema.get("type") != "object":
            raise _bad(
                f"{where}: schema must be a JSON Schema of 'type: \"object\"', got "
                f"'type: \"{schema.get('type')}\"'.",
                "response_format",
            )
        check_schema(schema, (), where, "response_format")


def check_schema(node: object, path: tuple[str, ...], where: str, param: str) -> None:
    """Rule 5: every object closed and fully required, no refused keyword, all the way down."""
    if not isinstance(node, dict):
        return
    for keyword in _STRICT_REFUSED:
        if keyword in node:
            raise _bad(f"{where}: In context={path!r}, '{keyword}' is not permitted.", param)
    if node.get("type") == "object" or isinstance(node.get("properties"), dict):
        _check_object(node, path, where, param)
    for sub, sub_path in _subschemas(node, path):
        check_schema(sub, sub_path, where, param)


def _subschemas(
    node: Mapping[str, Any], path: tuple[str, ...]
) -> list[tuple[object, tuple[str, ...]]]:
    found: list[tuple[object, tuple[str, ...]]] = []
    for key in ("properties", "$defs", "definitions"):
        value = node.get(key)
        if isinstance(value, dict):
            found.extend((sub, (*path, key, name)) for name, sub in value.items())
    if "items" in node:
        found.append((node["items"], (*path, "items")))
    if isinstance(node.get("anyOf"), list):
        found.extend((sub, (*path, "anyOf", str(i))) for i, sub in enumerate(node["anyOf"]))
    return found


def _check_object(node: Mapping[str, Any], path: tuple[str, ...], where: str, param: str) -> None:
    code = "invalid_function_parameters" if param.startswith("tools") else None
    if node.get("additionalProperties") is not False:
        raise _bad(
            f"{where}: In context={path!r}, 'additionalProperties' is required to be supplied "
            "and to be false.",
            param,
            code,
        )
    missing = [k for k in (node.get("properties") or {}) if k not in (node.get("required") or [])]
    if missing:
        raise _bad(
            f"{where}: In context={path!r}, 'required' is required to be supplied and to be an "
            f"array including every key in properties. Missing '{missing[0]}'.",
            param,
            code,
        )


# --- the replies ------------------------------------------------------------------------------


def _usage(step: TwinReply) -> dict[str, Any]:
    return {
        "prompt_tokens": step.prompt_tokens,
        "completion_tokens": step.completion_tokens,
        "total_tokens": step.prompt_tokens + step.completion_tokens,
        "prompt_tokens_details": {"cached_tokens": step.cached_tokens, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": step.reasoning_tokens,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def _arguments(arguments: str | Mapping[str, Any]) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(dict(arguments))


def _finish(step: TwinReply) -> str:
    return step.finish_reason or ("tool_calls" if step.tool_calls else "stop")


def _completion(step: TwinReply, model: str) -> dict[str, Any]:
    calls = [
        {"id": f"call_{i}", "type": "function", "function": {"name": n, "arguments": _arguments(a)}}
        for i, (n, a) in enumerate(step.tool_calls)
    ]
    message: dict[str, Any] = {
        "role": "assistant",
        "content": step.text or None,
        "refusal": step.refusal,
        "annotations": [],
    }
    if calls:
        message["tool_calls"] = calls
    return {
        "id": "chatcmpl-twin",
        "object": "chat.completion",
        "created": 1_764_000_000,
        "model": model,
        "choices": [
            {"index": 0, "message": message, "logprobs": None, "finish_reason": _finish(step)}
        ],
        "usage": _usage(step),
        "service_tier": "default",
        "system_fingerprint": None,
    }


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def _deltas(step: TwinReply) -> list[dict[str, Any]]:
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": "", "refusal": None}]
    deltas.extend({"content": piece} for piece in _pieces(step.text, 4))
    deltas.extend({"refusal": piece} for piece in _pieces(step.refusal or "", 5))
    for i, (name, arguments) in enumerate(step.tool_calls):
        head = {"index": i, "id": f"call_{i}", "type": "function"}
        deltas.append({"tool_calls": [{**head, "function": {"name": name, "arguments": ""}}]})
        deltas.extend(
            {"tool_calls": [{"index": i, "function": {"arguments": piece}}]}
            for piece in _pieces(_arguments(arguments), 5)
        )
    return deltas


async def _stream(
    request: web.Request, step: TwinReply, model: str, usage: bool
) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    head = {"id": "chatcmpl-twin", "object": "chat.completion.chunk", "model": model}

    async def send(chunk: Mapping[str, Any]) -> None:
        await response.write(f"data: {json.dumps({**head, **chunk})}\n\n".encode())

    for delta in _deltas(step):
        await send({"choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
    if not step.complete:
        return response
    await send({"choices": [{"index": 0, "delta": {}, "finish_reason": _finish(step)}]})
    if usage:
        await send({"choices": [], "usage": _usage(step)})
    await response.write(b"data: [DONE]\n\n")
    return response


async def _replay(request: web.Request, path: Path) -> web.StreamResponse:
    raw = await asyncio.to_thread(path.read_bytes)
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    for start in range(0, len(raw), 333):  # odd-sized writes split lines and events
        await response.write(raw[start : start + 333])
    return response
