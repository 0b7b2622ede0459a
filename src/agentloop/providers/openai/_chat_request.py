"""The Chat Completions request: each message, tool and option on the wire (``openai.py``'s half).

``encode_request`` builds the payload as a dict (the form tests and users read); ``encode_body``
builds the same JSON, byte for byte, as ``OpenAIClient`` sends it: every message is encoded to
JSON text once for the life of a conversation (``Message.encoded``) and the tools' JSON is kept
by the client while they stay the same, so a request re-encodes only what is new. The wire
mapping itself is described in ``openai.py``'s docstring.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from agentloop._util.jsontext import encoder, flat_object
from agentloop.messages import Message, TextPart, ThinkingPart, ToolCallPart, ToolResultPart
from agentloop.model import (
    INVALID_JSON_KEY,
    MEDIA_KINDS,
    ModelRequest,
    ModelSettings,
    OutputSpec,
    ToolSpec,
    with_tool_changes,
)
from agentloop.providers.openai._chat_media import (
    ChatWire,
    carries_media,
    encode_tool_results,
    encode_user,
    refuse_media,
    refuse_misplaced,
)
from agentloop.providers.openai._chat_strict import strict_schema
from agentloop.providers.profiles import merge_body

__all__ = [
    "CACHE_KEY_HOSTS",
    "body_tail",
    "encode_body",
    "encode_request",
    "encode_tools",
    "head_json",
    "options_json",
    "prompt_cache_key",
    "splice_body",
    "spliced",
]

_WIRE_KEY = "openai-chat"

_dumps = encoder()
"""``json.dumps``: the same text, without its set-up per call (``_util.jsontext``)."""
_dumps_unicode = encoder(ensure_ascii=False)
"""``json.dumps(value, ensure_ascii=False)``, the same way."""
_QUOTE: Callable[[str], str] = json.encoder.encode_basestring_ascii
"""How ``json.dumps`` writes a string (escaped to ASCII), the C function where there is one."""
_QUOTE_UNICODE: Callable[[str], str] = json.encoder.encode_basestring
"""How ``json.dumps(..., ensure_ascii=False)`` writes a string."""


def _encode_arguments(arguments: Mapping[str, Any]) -> str:
    raw = arguments.get(INVALID_JSON_KEY)
    if len(arguments) == 1 and isinstance(raw, str):
        return raw
    value = arguments if type(arguments) is dict else dict(arguments)
    text = flat_object(value, _QUOTE_UNICODE)  # the common call: no encoder to build
    return _dumps_unicode(value) if text is None else text


def _encode_message(message: Message) -> ChatWire:
    """One agentloop message as its Chat Completions wire messages, and the media they carry.

    An assistant message is read through ``Message.text`` and ``Message.tool_calls`` only, so a
    ``ThinkingPart`` never reaches the wire: Chat Completions has no field for reasoning. User
    and tool messages with media are encoded by ``_chat_media``.
    """
    if message.role == "tool":
        return encode_tool_results(message)
    if message.role == "system" and not message.text:  # a tool change only: it joins tools
        return [], ()
    if message.role != "assistant":
        return encode_user(message)
    if carries_media(message.parts):
        refuse_misplaced(message)
    # content is "" rather than null beside tool calls: llama.cpp's server rejects null
    wire: dict[str, Any] = {"role": "assistant", "content": message.text}
    calls = message.tool_calls
    if calls:
        wire["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": _encode_arguments(call.arguments)},
            }
            for call in calls
        ]
    return [wire], ()


def _encode_tool(spec: ToolSpec, strict: bool) -> dict[str, Any]:
    function: dict[str, Any] = {"name": spec.name, "description": spec.description}
    if strict:
        rewritten = strict_schema(spec.parameters)
        function["parameters"] = dict(rewritten.schema)
        function["strict"] = rewritten.strict
    else:
        function["parameters"] = dict(spec.parameters)
    return {"type": "function", "function": function}


def _response_format(output: OutputSpec, strict: bool) -> dict[str, Any]:
    rewritten = strict_schema(output.schema) if strict else None
    return {
        "type": "json_schema",
        "json_schema": {
            "name": output.name,
            "schema": dict(rewritten.schema if rewritten else output.schema),
            "strict": rewritten.strict if rewritten else False,
        },
    }


def _tool_choice(choice: str) -> str | dict[str, Any]:
    if choice in ("auto", "required", "none"):
        return choice
    return {"type": "function", "function": {"name": choice}}


def _apply_settings(payload: dict[str, Any], settings: ModelSettings, max_field: str) -> None:
    optional: dict[str, Any] = {
        "temperature": settings.temperature,
        "top_p": settings.top_p,
        "seed": settings.seed,
        max_field: settings.max_tokens,
        "stop": list(settings.stop) if settings.stop is not None else None,
        "tool_choice": _tool_choice(settings.tool_choice) if settings.tool_choice else None,
        "reasoning_effort": settings.reasoning_effort,
    }
    payload.update({key: value for key, value in optional.items() if value is not None})
    if settings.extra_body:
        merge_body(payload, settings.extra_body)


CACHE_KEY_HOSTS = frozenset({"api.openai.com", "openrouter.ai"})
"""Servers that accept ``prompt_cache_key`` (others may reject unknown fields)."""


def prompt_cache_key(session_id: str) -> str:
    """The ``prompt_cache_key`` of a session: stable, at most 64 characters, no user data."""
    digest = hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()
    return "agentloop-" + digest[:32]


def encode_request(
    request: ModelRequest,
    model: str,
    *,
    stream: bool = False,
    max_field: str = "max_tokens",
    cache_key: bool = False,
    strict: bool = False,
    media: frozenset[str] = MEDIA_KINDS,
) -> dict[str, Any]:
    """The Chat Completions payload for ``request`` (each message encoded once, then reused).

    ``cache_key``: the server accepts ``prompt_cache_key`` (sent when caching is on and the
    request has a session). ``strict``: send tools and structured output ``strict`` where the
    schema allows (``OpenAIClient`` passes the model profile's ``strict_schema``). ``media``:
    the media kinds the model takes; any other part is a ``ConfigurationError``, as is one this
    endpoint has no form for (``_chat_media``).
    """
    request = with_tool_changes(request)  # SPEC 28: an entry's tool change joins tools
    name = request.model or model
    messages: list[dict[str, Any]] = []
    if request.system:
        messages.append({"role": "system", "content": request.system})
    for message in request.messages:
        wire, carried = message.encoded(_WIRE_KEY, _encode_message)
        if carried:
            refuse_media(carried, media, name)
        messages.extend(wire)
    payload: dict[str, Any] = {"model": name, "messages": messages}
    if request.tools:
        payload["tools"] = encode_tools(request.tools, strict)
    _add_options(payload, request, stream, max_field, cache_key, strict)
    return payload


def encode_tools(tools: Iterable[ToolSpec], strict: bool) -> list[dict[str, Any]]:
    return [_encode_tool(spec, strict) for spec in tools]


def _add_options(
    payload: dict[str, Any],
    request: ModelRequest,
    stream: bool,
    max_field: str,
    cache_key: bool,
    strict: bool,
) -> None:
    """Every field after ``model``, ``messages`` and ``tools``, in ``encode_request``'s order."""
    if stream:
        payload["stream"] = True
        payload["stream_options"] = {"include_usage": True}
    if request.output is not None:  # native structured output (RunConfig.output_mode="native")
        payload["response_format"] = _response_format(request.output, strict)
    if cache_key and request.settings.cache and request.session_id:
        payload["prompt_cache_key"] = prompt_cache_key(request.session_id)
    _apply_settings(payload, request.settings, max_field)


_SPLICED = frozenset({"model", "messages", "tools"})
_JSON_KEY = "openai-chat-json"


def _message_json(message: Message) -> tuple[str, tuple[Any, ...]]:
    """A message's wire messages as JSON text (``json.dumps`` each), and the media they carry.

    The list encoded at once, without its brackets: the items joined by ``", "``, as
    ``json.dumps`` separates them (one encoder call instead of one per wire message). A turn's
    two messages (its tool calls, its results) are written from their escaped strings instead.
    """
    text = _turn_json(message)
    if text is not None:
        return text, ()
    wire, carried = _encode_message(message)
    return _dumps(wire)[1:-1], carried


_CALL_PARTS = frozenset({TextPart, ThinkingPart, ToolCallPart})


def _turn_json(message: Message) -> str | None:
    """``_dumps(wire)[1:-1]`` of a plain user, tool-call or tool-result message, else None.

    What ``json.dumps`` writes for those wire dicts (keys in their order, ``", "`` and ``": "``
    between them, each string escaped by the encoder it uses), built from the escaped strings:
    the generic encoder costs about 12,000 instructions a message. Any other message (media, a
    value that is not a ``str``) is None: the generic path encodes it.
    """
    role = message.role
    if role == "tool":
        return _results_json(message.parts)
    if role == "user":
        if not all(type(part) is TextPart for part in message.parts):
            return None  # media: the generic path
        text = message.text
        return f'{{"role": "user", "content": {_QUOTE(text)}}}' if type(text) is str else None
    if role != "assistant" or not _CALL_PARTS.issuperset(map(type, message.parts)):
        return None
    return _calls_json(message)


def _results_json(parts: tuple[Any, ...]) -> str | None:
    """The ``role: tool`` wire messages of a turn's results, joined (None: the generic path)."""
    quote, results = _QUOTE, []
    for part in parts:
        if type(part) is not ToolResultPart or part.media:
            return None
        call_id, content = part.call_id, part.content
        if type(call_id) is not str or type(content) is not str:
            return None
        results.append(f'{{"role": "tool", "tool_call_id": {quote(call_id)}, '
                       f'"content": {quote(content)}}}')  # fmt: skip
    return ", ".join(results)


def _calls_json(message: Message) -> str | None:
    """The wire message of an assistant message of text and tool calls (None: generic path)."""
    quote, calls = _QUOTE, []
    for call in message.tool_calls:
        call_id, name = call.id, call.name
        if type(call_id) is not str or type(name) is not str:
            return None
        arguments = quote(_encode_arguments(call.arguments))
        calls.append(f'{{"id": {quote(call_id)}, "type": "function", "function": '
                     f'{{"name": {quote(name)}, "arguments": {arguments}}}}}')  # fmt: skip
    head = f'{{"role": "assistant", "content": {quote(message.text)}'
    return f'{head}, "tool_calls": [{", ".join(calls)}]}}' if calls else head + "}"


def head_json(name: str, system: str | None) -> str:
    """The body's start: ``{"model": ..., "messages": [`` and the system message, if any."""
    head = f'{{"model": {_dumps(name)}, "messages": ['
    if system:
        head += _dumps({"role": "system", "content": system})
    return head


def options_json(
    request: ModelRequest, *, stream: bool, max_field: str, cache_key: bool, strict: bool
) -> str:
    """The body's end: the fields after ``tools`` as JSON text, ``, "stream": true, ...}``."""
    rest: dict[str, Any] = {}
    _add_options(rest, request, stream, max_field, cache_key, strict)
    return ", " + json.dumps(rest)[1:] if rest else "}"


def encode_body(
    request: ModelRequest,
    model: str,
    tools: str,
    *,
    stream: bool,
    max_field: str,
    cache_key: bool,
    strict: bool,
    media: frozenset[str],
    options: str | None = None,
    head: str | None = None,
) -> bytes:
    """``json.dumps(encode_request(...)).encode()``, byte for byte, without re-encoding history.

    Each message is encoded to JSON once for the life of the conversation (``Message.encoded``)
    and ``tools`` is the JSON of the request's tools (the client keeps it while they stay the
    same), so a request costs the new messages, not the whole transcript. ``options`` is
    ``options_json`` of the request and ``head`` is ``head_json`` of its model and system prompt
    (the client keeps both while they stay the same). An ``extra_body`` that sets ``model``,
    ``messages`` or ``tools`` takes the plain path.
    """
    if not spliced(request):
        payload = encode_request(
            request,
            model,
            stream=stream,
            max_field=max_field,
            cache_key=cache_key,
            strict=strict,
            media=media,
        )
        return json.dumps(payload).encode()
    if head is None:
        head = head_json(request.model or model, request.system)
    if options is None:
        options = options_json(
            request, stream=stream, max_field=max_field, cache_key=cache_key, strict=strict
        )
    tail = body_tail(tools if request.tools else "", options)
    return splice_body(request, model, head, tail, media)


def spliced(request: ModelRequest) -> bool:
    """Whether ``encode_body`` splices the messages' JSON (else its ``extra_body`` sets them)."""
    extra = request.settings.extra_body
    return not extra or _SPLICED.isdisjoint(extra)


def body_tail(tools: str, options: str) -> str:
    """What follows the messages in the body: the tools' JSON (none: "") and ``options_json``."""
    return f', "tools": {tools}{options}' if tools else options


def splice_body(
    request: ModelRequest, model: str, head: str, tail: str, media: frozenset[str]
) -> bytes:
    """``head``, each message's JSON (made once, ``Message.encoded``), then ``tail``."""
    texts = []
    for message in request.messages:
        text, carried = message.encoded(_JSON_KEY, _message_json)
        if carried:
            refuse_media(carried, media, request.model or model)
        if text:
            texts.append(text)
    joined = ", ".join(texts)
    if joined and head[-1] == "}":  # after the system message
        joined = ", " + joined
    return f"{head}{joined}]{tail}".encode()
