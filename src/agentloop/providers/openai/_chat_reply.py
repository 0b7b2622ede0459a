"""Decoding Chat Completions replies: one JSON body, or an SSE stream folded chunk by chunk.

``parse_completion`` reads a non-streaming body; ``ChatStreamAccumulator`` folds stream chunks
into deltas and one final ``ModelResponse``. Both read every field through ``_wire`` (a wrong
shape is ``ResponseInvalid``, the same in both paths), classify an ``{"error": ...}`` object
found in a 200 body or a chunk like an HTTP error, and decode a tool call's argument text with
``decode_arguments`` (the ``INVALID_JSON_KEY`` convention). ``openai.py`` re-exports them.

A refusal is never an answer (SPEC 16): a non-empty ``message.refusal`` (or streamed
``delta.refusal`` text) raises ``ModelRefused("refusal", <the refusal text>)`` (for a refusal,
``text`` is what the model said in refusing), and ``finish_reason="content_filter"`` raises
``ModelRefused("content_filter", <the text so far>)``. Streamed refusal text is collected, never
sent as ``text_delta`` (it is not the answer); the error is raised when choice 0 finishes. An
empty ``refusal`` (``""``, which every recorded stream opens with) is no refusal: Chat
Completions has no way to refuse without words, so "a refusal with no text" cannot be told from
none. A stream cut before it finishes stays ``ResponseInvalid`` (retryable), whatever it held.

A reply cut at the output limit (``finish_reason="length"``) keeps a tool call whose arguments
are unfinished as ``{INVALID_JSON_KEY: <raw text>}`` with ``stop_reason`` ``length``; the engine
answers it with the cut-off soft text and never runs it. The *last* call of such a reply with no
argument text at all counts as cut too (an empty text would otherwise mean ``{}`` and run).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentloop.errors import ModelRefused, ResponseInvalid
from agentloop.messages import Message, Part, TextPart, ThinkingPart, ToolCallPart, Usage
from agentloop.model import INVALID_JSON_KEY, ModelResponse, StreamEvent
from agentloop.providers._classify import embedded_error, invalid_body
from agentloop.providers._wire import (
    WireError,
    as_count,
    as_index,
    as_list,
    as_object,
    decode_json,
    dumps,
    loads,
    nonempty_str,
    opt_object,
    opt_str,
    wrong,
)
from agentloop.safety.redact import redact_secrets

__all__ = ["ChatStreamAccumulator", "decode_arguments", "parse_completion"]

_DONE = "[DONE]"
_CUT = "length"
_FILTERED = "content_filter"


def decode_arguments(raw: str) -> dict[str, Any]:
    """Decode a tool call's argument text (the ``INVALID_JSON_KEY`` convention on failure)."""
    if not raw.strip():
        return {}
    try:
        value = decode_json(raw)
    except (ValueError, RecursionError):  # too deep to decode is as invalid as bad JSON
        return {INVALID_JSON_KEY: raw}
    return value if isinstance(value, dict) else {INVALID_JSON_KEY: raw}


def _usage(value: object) -> Usage:
    """Token counts; reasoning tokens are a part of ``completion_tokens`` (capped at it).

    The common reply (an object of plain counts, details absent or objects of counts) is read
    without a call per field; anything else goes through the typed reads, which raise.
    """
    if type(value) is dict:
        prompt, output = value.get("prompt_tokens"), value.get("completion_tokens")
        details = value.get("prompt_tokens_details")
        more = value.get("completion_tokens_details")
        details = _NO_DETAILS if details is None else details
        more = _NO_DETAILS if more is None else more
        if type(details) is dict and type(more) is dict:
            cached, written = details.get("cached_tokens", 0), details.get("cache_write_tokens", 0)
            thought = more.get("reasoning_tokens", 0)
            counts = (prompt, output, cached, written, thought)
            if (
                type(prompt) is type(output) is type(cached) is type(written) is int
                and type(thought) is int
                and 0 <= min(counts)
                and max(counts) < _MAX_COUNT
            ):
                return Usage(prompt, output, cached, written, min(output, thought))
    return _typed_usage(value)


_NO_DETAILS: dict[str, Any] = {}
_MAX_COUNT = 2**63


def _typed_usage(value: object) -> Usage:
    """``_usage`` field by field through the typed reads (a wrong shape raises ``WireError``)."""
    usage = opt_object(value, "usage")
    details = opt_object(usage.get("prompt_tokens_details"), "usage.prompt_tokens_details")
    output = as_count(usage.get("completion_tokens"), "usage.completion_tokens")
    thought = opt_object(
        usage.get("completion_tokens_details"), "usage.completion_tokens_details"
    ).get("reasoning_tokens")
    return Usage(
        as_count(usage.get("prompt_tokens"), "usage.prompt_tokens"),
        output,
        as_count(details.get("cached_tokens"), "usage.prompt_tokens_details.cached_tokens"),
        as_count(
            details.get("cache_write_tokens"), "usage.prompt_tokens_details.cache_write_tokens"
        ),
        min(output, as_count(thought, "usage.completion_tokens_details.reasoning_tokens")),
    )


def _arguments(raw: str, cut: bool) -> dict[str, Any]:
    """A call's decoded arguments; ``cut``: the last call of a reply stopped at the limit."""
    if cut and not raw.strip():
        return {INVALID_JSON_KEY: raw}
    return decode_arguments(raw)


def _refuse(refusal: str | None, finish: str | None, text: str) -> None:
    """Raise ``ModelRefused`` for a refusal or a filtered reply (see the module docstring)."""
    if refusal:
        raise ModelRefused("refusal", refusal)
    if finish == _FILTERED:
        raise ModelRefused(_FILTERED, text)


def _argument_text(value: object, path: str) -> str:
    """A call's ``arguments``: the JSON text; an object (sent by some servers) is re-encoded."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, dict):
        return dumps(value, path)
    raise wrong(path, "a string or an object", value)


def _parse_call(value: object, index: int, cut: bool) -> ToolCallPart:
    if type(value) is dict:  # the common call, read without a call per field
        function = value.get("function")
        if type(function) is dict:
            name, raw, call_id = function.get("name"), function.get("arguments"), value.get("id")
            if type(name) is str and name and type(raw) is str:
                if call_id is None or type(call_id) is str:
                    return ToolCallPart(call_id or f"call_{index}", name, _arguments(raw, cut))
    return _typed_call(value, index, cut)


def _typed_call(value: object, index: int, cut: bool) -> ToolCallPart:
    """``_parse_call`` through the typed reads (a wrong shape raises ``WireError``)."""
    path = f"choices[0].message.tool_calls[{index}]"
    call = as_object(value, path)
    function = as_object(call.get("function"), f"{path}.function")
    name = nonempty_str(function.get("name"), f"{path}.function.name")
    raw = _argument_text(function.get("arguments"), f"{path}.function.arguments")
    call_id = opt_str(call.get("id"), f"{path}.id") or f"call_{index}"
    return ToolCallPart(call_id, name, _arguments(raw, cut))


def _reasoning(value: Mapping[str, Any], path: str) -> str | None:
    """The readable reasoning an OpenAI-compatible server sends beside the text.

    ``reasoning_content`` (DeepSeek, vLLM, llama.cpp, the fake server) or ``reasoning``
    (OpenRouter). Chat Completions has no field to send it back, so it is kept for the record and
    the screen (a ``ThinkingPart`` this adapter never encodes), never replayed.
    """
    text = opt_str(value.get("reasoning_content"), f"{path}.reasoning_content")
    if text is None and isinstance(value.get("reasoning"), str):
        text = value["reasoning"]
    return text or None


def _parse_message(value: object, finish: str | None, provider: str | None = None) -> Message:
    message = value if type(value) is dict else as_object(value, "choices[0].message")
    content = message.get("content")
    if content is not None and type(content) is not str:
        content = opt_str(content, "choices[0].message.content")
    refusal = message.get("refusal")
    if refusal is not None and type(refusal) is not str:
        refusal = opt_str(refusal, "choices[0].message.refusal")
    if refusal or finish == _FILTERED:
        _refuse(refusal, finish, content or "")
    parts: list[Part] = [TextPart(content)] if content else []
    if message.get("reasoning_content") is not None or message.get("reasoning") is not None:
        thought = _reasoning(message, "choices[0].message")
        if thought is not None:
            parts.insert(0, ThinkingPart(thought, provider=provider))
    calls = message.get("tool_calls")
    if calls is not None and type(calls) is not list:
        calls = as_list(calls, "choices[0].message.tool_calls")
    if calls:
        last, cut = len(calls) - 1, finish == _CUT
        for index, call in enumerate(calls):
            parts.append(_parse_call(call, index, cut and index == last))
    return Message("assistant", tuple(parts))


def _completion(
    data: object, model: str, request_id: str | None, provider: str | None = None
) -> ModelResponse:
    """The typed read of a chat completion body; a wrong shape raises ``WireError``.

    Each field is checked inline and read through its typed read only when it is not what a
    well-formed reply holds (which then raises, or takes it as the read would).
    """
    body = data if type(data) is dict else as_object(data, "body")
    choices = body.get("choices")
    if type(choices) is not list:
        choices = as_list(choices, "choices")
    if not choices:
        raise WireError("choices", "expected at least one choice")
    choice = choices[0]
    if type(choice) is not dict:
        choice = as_object(choice, "choices[0]")
    finish = choice.get("finish_reason")
    if finish is not None and type(finish) is not str:
        finish = opt_str(finish, "choices[0].finish_reason")
    finish = finish or None
    message = _parse_message(choice.get("message"), finish, provider)
    usage = _usage(body.get("usage"))
    name = body.get("model")
    if name is not None and type(name) is not str:
        name = opt_str(name, "model")
    return ModelResponse(message, usage, name or model, finish, request_id)  # by position: cheaper


def parse_completion(
    data: object,
    text: str,
    *,
    provider: str,
    model: str,
    request_id: str | None = None,
    redactor: Callable[[str], str] | None = None,
) -> ModelResponse:
    """A non-streaming Chat Completions body as a ``ModelResponse`` (``ResponseInvalid`` else).

    A refused or filtered reply raises ``ModelRefused``. ``redactor`` cleans ``text`` before it
    is kept on an error; successful replies skip it.
    """
    if isinstance(data, dict) and data.get("error"):
        body = redactor(text) if redactor else text
        raise embedded_error(data["error"], body, provider=provider, request_id=request_id)
    try:
        return _completion(data, model, request_id, provider)
    except WireError as exc:
        raise invalid_body(
            f"{provider}: the reply is not a chat completion ({exc})",
            redactor(text) if redactor is not None else text,
            provider,
            request_id,
        ) from exc


_CALL = "choices[].delta.tool_calls[]"  # constant paths: no formatting on the hot path
_CALL_ID = _CALL + ".id"
_CALL_FUNCTION = _CALL + ".function"
_CALL_NAME = _CALL + ".function.name"
_CALL_ARGUMENTS = _CALL + ".function.arguments"
_CALL_INDEX = _CALL + ".index"


@dataclass(slots=True)
class _StreamedCall:
    """One tool call being streamed: its id, name and argument fragments so far."""

    id: str = ""
    name: str = ""
    fragments: list[str] = field(default_factory=list)


class ChatStreamAccumulator:
    """Folds Chat Completions stream chunks (choice 0) into deltas and one final response.

    Tool-call fragments go to lanes, in order of first appearance: a fragment joins the lane of
    its ``index``, unless it carries an id different from the one that lane already has (two
    calls sent under one index stay two calls). Without an ``index``, a new id opens a new lane
    and a fragment without an id continues the last one. ``StreamEvent.index`` is the lane.
    """

    def __init__(self, *, provider: str, model: str, secrets: Sequence[str] = ()) -> None:
        self.provider = provider
        self.model = model
        self.secrets = tuple(secrets)
        self.request_id: str | None = None
        self.done = False
        self.events_seen = 0
        self._text: list[str] = []
        self._thought: list[str] = []
        self._refusal: list[str] = []
        self._calls: list[_StreamedCall] = []
        self._lanes: dict[int, int] = {}
        self._finish: str | None = None
        self._usage = Usage()

    def feed(self, data: str) -> list[StreamEvent]:
        """One SSE ``data`` payload; returns the deltas it carries."""
        self.events_seen += 1
        stripped = data.strip()
        if not stripped:
            return []
        if stripped == _DONE:
            self.done = True
            return []
        try:
            return self._chunk(loads(data, "stream chunk"), data)
        except WireError as exc:
            raise self._bad(f"malformed stream chunk ({exc})", data) from exc

    def _chunk(self, value: object, data: str) -> list[StreamEvent]:
        chunk = value if type(value) is dict else as_object(value, "stream chunk")
        if chunk.get("error"):
            body = redact_secrets(data, self.secrets)
            raise embedded_error(
                chunk["error"], body, provider=self.provider, request_id=self.request_id
            )
        model = chunk.get("model")
        if model is not None and type(model) is not str:
            model = opt_str(model, "model")
        self.model = model or self.model
        usage = chunk.get("usage")
        if usage is not None and usage != {}:
            self._usage = _usage(usage)
        choices = chunk.get("choices")
        if type(choices) is not list:
            choices = as_list(choices, "choices")
        return self._choices(choices) if choices else []

    def _choices(self, choices: Iterable[Any]) -> list[StreamEvent]:
        """The deltas of choice 0; each field checked inline, through its typed read if odd."""
        events: list[StreamEvent] = []
        for value in choices:
            choice = value if type(value) is dict else as_object(value, "choices[]")
            index = choice.get("index")
            if index is not None and (type(index) is not int or index < 0):
                index = as_index(index, "choices[].index")
            if index:
                continue  # only choice 0 (a missing index means 0)
            finish = choice.get("finish_reason")
            if finish is not None and type(finish) is not str:
                finish = opt_str(finish, "choices[].finish_reason")
            self._finish = finish or self._finish
            delta = choice.get("delta")
            if type(delta) is not dict:
                delta = opt_object(delta, "choices[].delta")
            self._delta(delta, events)
            if finish:
                _refuse("".join(self._refusal), finish, "".join(self._text))
        return events

    def _delta(self, delta: Mapping[str, Any], events: list[StreamEvent]) -> None:
        """Fold one ``delta`` of choice 0, its events added to ``events``."""
        content, refusal = delta.get("content"), delta.get("refusal")
        if content is not None and type(content) is not str:
            content = opt_str(content, "choices[].delta.content")
        if refusal is not None and type(refusal) is not str:
            refusal = opt_str(refusal, "choices[].delta.refusal")
        if refusal:
            self._refusal.append(refusal)  # never a text_delta: a refusal is no answer
        if delta.get("reasoning_content") is not None or delta.get("reasoning") is not None:
            thought = _reasoning(delta, "choices[].delta")
            if thought is not None:
                self._thought.append(thought)
                events.append(StreamEvent("thinking_delta", text=thought))
        if content:
            self._text.append(content)
            events.append(StreamEvent("text_delta", text=content))
        calls = delta.get("tool_calls")
        if calls is not None and type(calls) is not list:
            calls = as_list(calls, "choices[].delta.tool_calls")
        if calls:
            for call in calls:
                read = call if type(call) is dict else as_object(call, _CALL)
                events.append(self._tool_delta(read))

    def _tool_delta(self, call: Mapping[str, Any]) -> StreamEvent:
        call_id = call.get("id")
        if call_id is not None and type(call_id) is not str:
            call_id = opt_str(call_id, _CALL_ID)
        call_id = call_id or None
        function = call.get("function")
        if type(function) is not dict:
            function = opt_object(function, _CALL_FUNCTION)
        name = function.get("name")
        if name is not None and type(name) is not str:
            name = opt_str(name, _CALL_NAME)
        fragment = function.get("arguments")
        if type(fragment) is not str:
            fragment = _argument_text(fragment, _CALL_ARGUMENTS)
        index = call.get("index")
        if index is not None and (type(index) is not int or index < 0):
            index = as_index(index, _CALL_INDEX)
        lane = self._lane(index, call_id)
        state = self._calls[lane]
        state.id = state.id or call_id or ""
        state.name = state.name or name or ""
        state.fragments.append(fragment)
        return StreamEvent(
            "tool_call_delta", index=lane, call_id=call_id, name=name, arguments=fragment
        )

    def _lane(self, index: int | None, call_id: str | None) -> int:
        """The lane of a fragment (see the class docstring)."""
        if index is None:
            known = [lane for lane, c in enumerate(self._calls) if call_id and c.id == call_id]
            if known:
                return known[0]
            if call_id or not self._calls:
                return self._new_lane()
            return len(self._calls) - 1
        lane = self._lanes.get(index)
        if lane is None or (call_id and self._calls[lane].id not in ("", call_id)):
            lane = self._lanes[index] = self._new_lane()
        return lane

    def _new_lane(self) -> int:
        self._calls.append(_StreamedCall())
        return len(self._calls) - 1

    def _bad(self, message: str, body: str) -> ResponseInvalid:
        text = redact_secrets(body, self.secrets)
        return invalid_body(f"{self.provider}: {message}", text, self.provider, self.request_id)

    def response(self) -> ModelResponse:
        """The complete reply; ``ResponseInvalid`` when ``[DONE]`` never arrived.

        ``ModelRefused`` for refusal text that no finish reason closed (a server that sends
        ``[DONE]`` without one).
        """
        if not self.done:
            raise self._bad(
                f"stream ended without [DONE] after {self.events_seen} events (truncated?)",
                "".join(self._text),
            )
        _refuse("".join(self._refusal), self._finish, "".join(self._text))
        parts: list[Part] = [TextPart("".join(self._text))] if self._text else []
        if self._thought:
            parts.insert(0, ThinkingPart("".join(self._thought), provider=self.provider))
        last = len(self._calls) - 1
        for lane, call in enumerate(self._calls):
            raw = "".join(call.fragments)
            if not call.name:
                raise self._bad(f"streamed tool call {lane} has no name", raw)
            cut = self._finish == _CUT and lane == last
            parts.append(ToolCallPart(call.id or f"call_{lane}", call.name, _arguments(raw, cut)))
        return ModelResponse(
            message=Message("assistant", tuple(parts)),
            usage=self._usage,
            model=self.model,
            stop_reason=self._finish,
            request_id=self.request_id,
        )
