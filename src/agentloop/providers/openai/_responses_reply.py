"""Decoding OpenAI Responses API replies: one ``response`` object, or the SSE events that build it.

``parse_response`` reads a JSON body; ``ResponsesStream`` folds stream events into deltas and, at
the terminal event, the same ``ModelResponse`` (both read the output items with one parser, so a
reply decodes the same either way). Every field is read through ``_wire``: a wrong shape is
``ResponseInvalid``. ``responses.py`` re-exports these names.

What a reply becomes (documented decisions on everything the provider may send):

- ``status``: ``completed`` -> ``stop_reason="completed"``; ``incomplete`` -> the
  ``incomplete_details.reason`` (``max_output_tokens`` is a truncation: a ``function_call`` cut in
  its arguments, marked ``incomplete`` or left ``in_progress``, or the last call with no
  argument text at all, keeps the raw text under ``INVALID_JSON_KEY`` and never runs),
  except ``content_filter`` -> ``ModelRefused("content_filter", <text so far>)``; ``failed`` ->
  the ``ProviderError`` its ``error`` names (below); any other status (``queued``,
  ``in_progress``, ``cancelled``: never the end of a request we send) -> ``ResponseInvalid``.
- A body without a ``status`` counts as ``completed`` (some compatible servers omit it).
- Output items: ``reasoning`` -> ``ThinkingPart(<summary texts joined by a blank line, else its
  reasoning_text content>, signature=encrypted_content, provider="openai", id=<rs_...>)`` (an item
  without an id is ``ResponseInvalid``; ``origin`` = the client's endpoint identity, so the
  part goes back only there); ``message`` -> its ``output_text`` as text and its ``phase``
  (``commentary`` | ``final_answer``) as ``Message.phase`` (the last message item's, when a
  reply has several); a
  ``refusal`` content part -> ``ModelRefused("refusal", <the refusal, or the text before it when
  the refusal is empty>)``; ``function_call`` -> ``ToolCallPart(call_id, name, arguments)``
  (``decode_arguments``: invalid JSON is kept under ``INVALID_JSON_KEY``). Items of the hosted
  tools (``web_search_call`` and the like) are a ``ProviderToolCallPart`` (the item raw) and its
  ``ProviderToolResultPart``, ``url_citation`` annotations ``Citation``s (``_hosted``, SPEC 24).
- Errors: a ``response.failed`` event, a ``failed`` body and an ``error`` event are classified by
  ``_classify.error_for_status`` with the status their ``code`` names (``rate_limit_exceeded``
  429, ``server_error`` 500, an HTTP number as is, any other code or an ``invalid_request_error``
  400, none 500), so ``RetryingClient`` treats them as the HTTP errors they stand for.
- A stream is complete only at ``response.completed`` or ``response.incomplete``; one that ends
  before is ``ResponseInvalid`` (never an answer).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from agentloop.errors import ModelRefused, ProviderError, ResponseInvalid
from agentloop.messages import Message, Part, TextPart, ThinkingPart, ToolCallPart, Usage
from agentloop.model import INVALID_JSON_KEY, ModelResponse, StreamEvent
from agentloop.providers._classify import error_for_status, invalid_body
from agentloop.providers._wire import (
    WireError,
    as_count,
    as_list,
    as_object,
    loads,
    nonempty_str,
    opt_object,
    opt_str,
    wrong,
)
from agentloop.providers.openai import _hosted as hosted
from agentloop.providers.openai._chat_reply import decode_arguments
from agentloop.safety.redact import redact_secrets

__all__ = ["PROVIDER", "ResponsesStream", "failure", "parse_response"]

PROVIDER = "openai"
"""``ThinkingPart.provider`` of a reasoning item: the wire family, whatever the client's name."""

_CUTS = frozenset({"max_output_tokens", "max_tokens"})
"""Incomplete reasons that mean the output limit (the spec's own example says ``max_tokens``)."""
_UNFINISHED = frozenset({"incomplete", "in_progress"})
"""A ``function_call`` item in one of these states was cut: it never runs."""

_ERROR_STATUS: Mapping[str, int] = {
    "server_error": 500,
    "rate_limit_exceeded": 429,
    "vector_store_timeout": 504,
}


def _error_status(detail: Mapping[str, Any]) -> int:
    code, kind = detail.get("code"), detail.get("type")
    if isinstance(code, int) and not isinstance(code, bool) and 400 <= code < 600:
        return code
    if isinstance(code, str) and code:
        return _ERROR_STATUS.get(code, 400)
    return 400 if kind == "invalid_request_error" else 500


def failure(
    error: object, *, provider: str, request_id: str | None, secrets: Sequence[str] = ()
) -> ProviderError:
    """The ``ProviderError`` a ``response.failed``/``error`` payload stands for (any shape).

    A field of the wrong type counts as absent: an error is classified as an error even when
    it is malformed.
    """
    detail: Mapping[str, Any] = error if isinstance(error, Mapping) else {}
    if isinstance(detail.get("error"), Mapping):  # {"type": "error", "error": {...}} (proxies)
        detail = detail["error"]
    message = detail.get("message")
    body = json.dumps(
        {
            "error": {
                "message": message if isinstance(message, str) else "the response failed",
                "type": detail.get("type") if isinstance(detail.get("type"), str) else None,
                "code": detail.get("code") if isinstance(detail.get("code"), str) else None,
            }
        }
    )
    result = error_for_status(_error_status(detail), {}, body, provider=provider, secrets=secrets)
    result.request_id = request_id
    return result


def _usage(value: object) -> Usage:
    usage = opt_object(value, "usage")
    inputs = opt_object(usage.get("input_tokens_details"), "usage.input_tokens_details")
    outputs = opt_object(usage.get("output_tokens_details"), "usage.output_tokens_details")
    return Usage(
        as_count(usage.get("input_tokens"), "usage.input_tokens"),
        as_count(usage.get("output_tokens"), "usage.output_tokens"),
        as_count(inputs.get("cached_tokens"), "usage.input_tokens_details.cached_tokens"),
        reasoning_tokens=as_count(
            outputs.get("reasoning_tokens"), "usage.output_tokens_details.reasoning_tokens"
        ),
    )


def _texts(value: object, path: str, kind: str) -> list[str]:
    """The ``text`` of every ``kind`` entry of a list (summary or content of a reasoning item)."""
    texts = []
    for index, entry in enumerate(as_list(value, path)):
        part = as_object(entry, f"{path}[{index}]")
        if part.get("type") == kind:
            texts.append(opt_str(part.get("text"), f"{path}[{index}].text") or "")
    return texts


def _reasoning(item: Mapping[str, Any], path: str, origin: str | None) -> ThinkingPart:
    texts = _texts(item.get("summary"), f"{path}.summary", "summary_text")
    if not texts:  # open-weight models served through the API send their raw reasoning
        texts = _texts(item.get("content"), f"{path}.content", "reasoning_text")
    return ThinkingPart(
        "\n\n".join(texts),
        signature=opt_str(item.get("encrypted_content"), f"{path}.encrypted_content"),
        provider=PROVIDER,
        id=nonempty_str(item.get("id"), f"{path}.id"),
        origin=origin,
    )


class _Output:
    """The parts read from a response's output items, and whether the model refused."""

    def __init__(self, origin: str | None = None) -> None:
        self.parts: list[Part] = []
        self.refusal: str | None = None
        self.said: list[str] = []
        self.phase: str | None = None
        self.origin = origin
        self.calls: dict[str, int] = {}

    def message(self, item: Mapping[str, Any], path: str) -> None:
        self.phase = opt_str(item.get("phase"), f"{path}.phase") or self.phase
        for index, entry in enumerate(as_list(item.get("content"), f"{path}.content")):
            where = f"{path}.content[{index}]"
            content = as_object(entry, where)
            kind = content.get("type")
            if kind == "output_text":
                text = opt_str(content.get("text"), f"{where}.text") or ""
                if text:
                    self.said.append(text)
                    cited = hosted.citations(content.get("annotations"))
                    self.parts.append(TextPart(text, citations=cited))
            elif kind == "refusal":
                refusal = opt_str(content.get("refusal"), f"{where}.refusal") or ""
                self.refusal = (self.refusal or "") + refusal

    def item(self, value: object, path: str) -> None:
        item = as_object(value, path)
        kind = item.get("type")
        if kind == "reasoning":
            self.parts.append(_reasoning(item, path, self.origin))
        elif kind == "message":
            self.message(item, path)
        elif kind == "tool_search_output":  # native tool search (SPEC 22), kept raw
            self.parts.append(hosted.search_output(item))
        elif hosted.is_hosted_call(kind):
            self.parts.extend(hosted.decode_item(item))
            name = str(kind).removesuffix("_call")
            self.calls[name] = self.calls.get(name, 0) + 1
        elif kind == "function_call":
            raw = opt_str(item.get("arguments"), f"{path}.arguments") or ""
            unfinished = item.get("status") in _UNFINISHED
            self.parts.append(
                ToolCallPart(
                    nonempty_str(item.get("call_id"), f"{path}.call_id"),
                    nonempty_str(item.get("name"), f"{path}.name"),
                    {INVALID_JSON_KEY: raw} if unfinished else decode_arguments(raw),
                )
            )

    def cut_last_call(self) -> None:
        """At the output limit, a last call without argument text was cut before its first byte.

        An empty text would otherwise mean ``{}`` and the call would run.
        """
        last = self.parts[-1] if self.parts else None
        if isinstance(last, ToolCallPart) and not last.arguments:
            self.parts[-1] = ToolCallPart(last.id, last.name, {INVALID_JSON_KEY: ""})

    def text(self) -> str:
        return "".join(self.said)


def _response(
    data: object, model: str, request_id: str | None, origin: str | None = None
) -> ModelResponse:
    """The typed read of a ``response`` object; raises ``WireError`` or ``ModelRefused``."""
    body = as_object(data, "response")
    status = opt_str(body.get("status"), "status") or "completed"
    output = _Output(origin)
    for index, item in enumerate(as_list(body.get("output"), "output")):
        output.item(item, f"output[{index}]")
    if output.refusal is not None:
        raise ModelRefused("refusal", output.refusal or output.text())
    if status == "incomplete":
        details = opt_object(body.get("incomplete_details"), "incomplete_details")
        stop = opt_str(details.get("reason"), "incomplete_details.reason") or "incomplete"
        if stop == "content_filter":
            raise ModelRefused("content_filter", output.text())
        if stop in _CUTS:
            output.cut_last_call()
    elif status == "completed":
        stop = status
    else:
        raise WireError("status", f"expected completed or incomplete, got {status!r}")
    usage = _usage(body.get("usage"))
    if output.calls:
        usage = replace(usage, provider_tool_calls=_kinds(output.calls))
    return ModelResponse(
        message=Message("assistant", tuple(output.parts), phase=output.phase),
        usage=usage,
        model=opt_str(body.get("model"), "model") or model,
        stop_reason=stop,
        request_id=request_id,
    )


def _kinds(calls: Mapping[str, int]) -> dict[str, int]:
    """Item names as kinds (``code_interpreter`` is ``code_execution``)."""
    named = {"code_interpreter": "code_execution"}
    return {named.get(name, name): count for name, count in calls.items()}


def parse_response(
    data: object,
    text: str,
    *,
    provider: str,
    model: str,
    request_id: str | None = None,
    redactor: Callable[[str], str] | None = None,
    origin: str | None = None,
) -> ModelResponse:
    """A non-streaming Responses API body as a ``ModelResponse``.

    Raises:
        ModelRefused: The model refused (a ``refusal`` part, or cut by the content filter).
        ProviderError: The body is a failed response or an ``{"error": ...}`` object.
        ResponseInvalid: Anything else that is not a finished response.
    """
    if isinstance(data, dict) and data.get("error"):
        raise failure(data["error"], provider=provider, request_id=request_id)
    try:
        return _response(data, model, request_id, origin)
    except WireError as exc:
        body = redactor(text) if redactor is not None else text
        raise invalid_body(
            f"{provider}: the reply is not a finished response ({exc})", body, provider, request_id
        ) from exc


def _last_entry(item: dict[str, Any], field: str, kind: str, key: str) -> dict[str, Any]:
    """The last ``kind`` entry of ``item[field]`` (a list), opened when the last is another kind.

    Streamed deltas are appended to it; a wrong shape from the server is ``WireError``.
    """
    entries = item.get(field)
    if entries is None:
        entries = item[field] = []
    if not isinstance(entries, list):
        raise wrong(f"item.{field}", "an array", entries)
    last = entries[-1] if entries else None
    if not (isinstance(last, dict) and last.get("type") == kind and isinstance(last.get(key), str)):
        last = {"type": kind, key: ""}
        entries.append(last)
    return last


_TERMINAL = frozenset({"response.completed", "response.incomplete"})


class ResponsesStream:
    """Folds Responses API stream events into deltas and, at the terminal event, one reply.

    Items are kept by ``output_index`` as the events build them (``output_item.added``, then
    the deltas, then ``output_item.done`` with the complete item). The terminal event's
    ``response.output`` is the reply when it has items; a server that sends it empty gets the
    items assembled here. ``StreamEvent.index`` of a tool-call delta counts the function calls
    in order of appearance.
    """

    def __init__(
        self,
        *,
        provider: str,
        model: str,
        secrets: Sequence[str] = (),
        origin: str | None = None,
    ) -> None:
        self.provider = provider
        self.origin = origin
        self.model = model
        self.secrets = tuple(secrets)
        self.request_id: str | None = None
        self.count = 0
        self.result: ModelResponse | None = None
        self._items: dict[int, dict[str, Any]] = {}
        self._lanes: dict[int, int] = {}

    @property
    def finished(self) -> bool:
        """True once the terminal event arrived."""
        return self.result is not None

    def feed(self, data: str, name: str | None = None) -> list[StreamEvent]:
        """One SSE event's ``data`` (and its ``event:`` name); returns the deltas it carries.

        The event's kind is its ``type`` field, else its SSE name (a server may send only one).
        """
        self.count += 1
        if not data.strip() or data.strip() == "[DONE]":
            return []
        try:
            event = as_object(loads(data, "stream event"), "stream event")
            return self._event(event, event.get("type") or name)
        except WireError as exc:
            raise self._bad(f"malformed stream event ({exc})", data) from exc

    def _event(self, event: Mapping[str, Any], kind: object) -> list[StreamEvent]:
        if kind in _TERMINAL:
            self._finish(as_object(event.get("response"), "response"))
        elif kind == "response.output_text.delta":
            return self._text(event)
        elif kind == "response.function_call_arguments.delta":
            return self._arguments(event)
        elif kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            return self._thinking(event, kind)
        elif kind == "response.refusal.delta":
            self._content(event, "refusal", "refusal")
        elif kind == "response.output_item.added":
            return self._added(event)
        elif kind == "response.output_item.done":
            self._items[self._index(event)] = dict(as_object(event.get("item"), "item"))
        elif kind in ("error", "response.failed"):
            self._fail(event, kind)
        return []

    def _index(self, event: Mapping[str, Any]) -> int:
        value = event.get("output_index")
        if type(value) is int and value >= 0:
            return value
        if value is None:
            return max(self._items, default=0)
        raise wrong("output_index", "a non-negative integer", value)

    def _item(self, event: Mapping[str, Any], kind: str) -> dict[str, Any]:
        index = self._index(event)
        item = self._items.get(index)
        if item is None:  # a delta before its output_item.added: open the item it belongs to
            item = self._items[index] = {"type": kind}
        return item

    def _added(self, event: Mapping[str, Any]) -> list[StreamEvent]:
        item = dict(as_object(event.get("item"), "item"))
        index = self._index(event)
        self._items[index] = item
        if item.get("type") != "function_call":
            return []
        lane = self._lanes.setdefault(index, len(self._lanes))
        item["arguments"] = opt_str(item.get("arguments"), "item.arguments") or ""
        call_id = opt_str(item.get("call_id"), "item.call_id")
        name = opt_str(item.get("name"), "item.name")
        return [
            StreamEvent(
                "tool_call_delta",
                index=lane,
                call_id=call_id,
                name=name,
                arguments=item["arguments"],
            )
        ]

    def _delta(self, event: Mapping[str, Any]) -> str:
        return opt_str(event.get("delta"), "delta") or ""

    def _text(self, event: Mapping[str, Any]) -> list[StreamEvent]:
        delta = self._content(event, "output_text", "text")
        return [StreamEvent("text_delta", text=delta)] if delta else []

    def _content(self, event: Mapping[str, Any], kind: str, key: str) -> str:
        """Append a text or refusal delta to its message item's content part."""
        delta = self._delta(event)
        item = self._item(event, "message")
        _last_entry(item, "content", kind, key)[key] += delta
        return delta

    def _arguments(self, event: Mapping[str, Any]) -> list[StreamEvent]:
        delta = self._delta(event)
        item = self._item(event, "function_call")
        item["arguments"] = (opt_str(item.get("arguments"), "item.arguments") or "") + delta
        lane = self._lanes.setdefault(self._index(event), len(self._lanes))
        return [StreamEvent("tool_call_delta", index=lane, arguments=delta)]

    def _thinking(self, event: Mapping[str, Any], kind: str) -> list[StreamEvent]:
        delta = self._delta(event)
        item = self._item(event, "reasoning")
        if kind == "response.reasoning_summary_text.delta":
            _last_entry(item, "summary", "summary_text", "text")["text"] += delta
        else:
            _last_entry(item, "content", "reasoning_text", "text")["text"] += delta
        return [StreamEvent("thinking_delta", text=delta)] if delta else []

    def _fail(self, event: Mapping[str, Any], kind: str) -> None:
        error: object = event
        if kind == "response.failed":
            error = opt_object(event.get("response"), "response").get("error")
        raise failure(
            error, provider=self.provider, request_id=self.request_id, secrets=self.secrets
        )

    def _finish(self, response: Mapping[str, Any]) -> None:
        output = as_list(response.get("output"), "response.output")
        if not output:
            output = [self._items[index] for index in sorted(self._items)]
        self.result = _response(
            {**response, "output": output}, self.model, self.request_id, self.origin
        )

    def _bad(self, message: str, body: str) -> ResponseInvalid:
        text = redact_secrets(body, self.secrets)
        return invalid_body(f"{self.provider}: {message}", text, self.provider, self.request_id)

    def response(self) -> ModelResponse:
        """The complete reply; ``ResponseInvalid`` when no terminal event arrived."""
        if self.result is None:
            texts = [
                part["text"]
                for item in self._items.values()
                if isinstance(item.get("content"), list)
                for part in item["content"]
                if isinstance(part, dict) and isinstance(part.get("text"), str)
            ]
            raise self._bad(
                f"stream ended without response.completed after {self.count} events (truncated?)",
                "".join(texts),
            )
        return self.result
