"""OpenAI Responses twin: a local ``/v1/responses`` server that enforces the API's documented rules.

``shared/spec/provider-rules.md`` ("OpenAI") lists the rules; this twin answers a request that
breaks one as OpenAI does, with its status and its error body ``{"error": {"message", "type",
"param", "code"}}`` and OpenAI's own text (found in integrators' reports of real replies):

1. Reasoning models (``o<N>...``, ``gpt-5...`` but ``gpt-5-chat``): ``temperature`` other than 1
   and ``top_p`` are 400 ``unsupported_parameter`` "Unsupported parameter: 'temperature' is not
   supported with this model."; ``max_tokens`` (a Chat Completions name) is 400 "Unsupported
   parameter: 'max_tokens'. In the Responses API, this parameter has moved to
   'max_output_tokens'."; ``stop`` and ``seed`` (no model takes them here) are 400
   ``unknown_parameter`` "Unknown parameter: 'stop'. Did you mean 'store'?".
3. Reasoning items. A reasoning model answers with a ``reasoning`` item first (its summary only
   when the request asked for one with ``reasoning.summary``); with ``include`` holding
   ``reasoning.encrypted_content`` it carries ``encrypted_content``, an HMAC of its id under the
   twin's key, as OpenAI's is opaque and checked. Sent back, each is checked:
   - a ``function_call`` the twin issued after reasoning item ``rs_X``, sent without ``rs_X``
     before it (since the last user message or tool output): 400 "Item 'fc_...' of type
     'function_call' was provided without its required 'reasoning' item: 'rs_X'.";
   - a reasoning item not followed by the output it produced (an assistant message or a
     function call): 400 "Item 'rs_...' of type 'reasoning' was provided without its required
     following item.";
   - a reasoning item without ``encrypted_content`` (the twin stores nothing, as with
     ``store: false``): 404 "Item with id 'rs_...' not found. Items are not persisted when
     `store` is set to false. ...";
   - ``encrypted_content`` that is not the twin's for that id: 400 ``invalid_encrypted_content``
     "The encrypted content gAAA...xyz= could not be verified.";
   - ``include`` asking for encrypted content on a model that does not reason: 400 "Encrypted
     content is not supported with this model." (param ``include``).
   ``store`` other than ``false`` is refused with a twin message: SPEC 16 keeps no state on
   OpenAI's side, and the twin, which stores nothing, could not answer such a client honestly.
   A ``function_call_output`` needs its ``function_call`` earlier: 400 "No tool call found for
   function call output with call_id ...".
4. Refusals: a reply may be a ``refusal`` content part, or ``incomplete`` with
   ``content_filter``.
5. Strict schemas: a function tool is strict unless it says ``strict: false`` (the Responses
   API's default), and a strict tool or ``text.format`` needs every object closed
   (``additionalProperties: false``) and every property required: 400 "Invalid schema for
   function 'NAME': In context=(), 'additionalProperties' is required to be supplied and to be
   false." and the ``required`` twin of it.
6. Media (``openai_responses_media``): a message's ``content`` list and a
   ``function_call_output``'s ``output`` list take ``input_text``, ``input_image`` and
   ``input_file`` only, each well formed (data URLs that decode to what they say, ``filename``
   beside ``file_data``, ``detail`` from the API's list, an ``image_url`` within 20,971,520
   characters), and no image or file reaches a model without vision.
7. Usage carries ``input_tokens_details.cached_tokens`` and
   ``output_tokens_details.reasoning_tokens``.

And "OpenAI and Gemini, late 2026": reasoning models include ``gpt-6*`` and later names, held
to rule 1 (rule 5; the Chat twin answers rule 5's ``unsupported_value`` wording); a
``reasoning.effort`` the model lacks is 400 "Unsupported value: 'reasoning_effort' does not
support 'max' with this model. Supported values are: ..." (rules 2-3: ``max`` on the sol models
only, ``xhigh`` from gpt-5.1-codex-max on, no ``minimal`` from 5.1, ``gpt-5-pro`` only
``high``); ``secret`` is the organisation whose key signs ``encrypted_content``, so a second
twin with another secret plays another organisation or Azure (``invalid_encrypted_content``);
models from gpt-5.3 on send ``phase`` on assistant messages, and an assistant message sent back
to one without it is recorded in ``unphased`` (OpenAI
documents no 400 for it, only degraded answers: rule 7).

Replies are scripted (``Reply``): text, calls, a refusal, an incomplete or failed response, an
``error`` event, an HTTP error, a stream cut before its terminal event, or raw bytes. Streams
send the events OpenAI sends, in its order (``response.created`` ... ``response.completed``).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from .openai_responses_media import check_content
from .openai_responses_search import search_problem

KEY = b"twin-secret"
MISSING_REASONING = (
    "Item '{fc}' of type 'function_call' was provided without its required 'reasoning' item: "
    "'{rs}'."
)
NO_FOLLOWING = "Item '{rs}' of type 'reasoning' was provided without its required following item."
NOT_FOUND = (
    "Item with id '{rs}' not found. Items are not persisted when `store` is set to false. Try "
    "again with `store` set to true, or remove this item from your input."
)
UNVERIFIED = "The encrypted content {short} could not be verified."
NO_ENCRYPTION = "Encrypted content is not supported with this model."
_REASONING_MODEL = re.compile(r"(o\d.*|gpt-5(?!-chat).*|gpt-([6-9]|\d{2,}).*)")
_PHASED = re.compile(r"gpt-5\.([3-9]|\d{2,}).*|gpt-([6-9]|\d{2,}).*")
"""Models that send ``phase`` on assistant messages (gpt-5.3-codex and later, OpenAI 2026 7)."""
_SOL = re.compile(r"gpt-(5\.6|[6-9](\.\d+)?|\d{2,}(\.\d+)?)-sol.*")


def is_reasoning(model: str) -> bool:
    """The models that reason (and reject sampling parameters)."""
    return _REASONING_MODEL.fullmatch(model.rpartition("/")[2]) is not None


def efforts(model: str) -> tuple[str, ...]:
    """The ``reasoning.effort`` values a model takes (the twin's own reading of OpenAI 2026 2-4)."""
    name = model.rpartition("/")[2]
    if _SOL.fullmatch(name):
        return ("none", "low", "medium", "high", "xhigh", "max")
    if name.startswith("gpt-5-pro"):
        return ("high",)
    if re.fullmatch(r"gpt-5\.1(-codex(-mini)?)?(-\d{4}.*)?|gpt-5\.1-(mini|chat).*", name):
        return ("none", "low", "medium", "high")
    if re.fullmatch(r"gpt-5\.1-codex-max.*|gpt-5\.\d+.*|gpt-([6-9]|\d{2,}).*", name):
        return ("none", "low", "medium", "high", "xhigh")
    if name.startswith("gpt-5"):
        return ("minimal", "low", "medium", "high")
    return ("low", "medium", "high")


def encrypt(rs_id: str, secret: bytes = KEY) -> str:
    """The twin's opaque ``encrypted_content`` for a reasoning item (``secret``: the org's)."""
    digest = hmac.new(secret, rs_id.encode(), hashlib.sha256).digest()
    return "gAAAAA" + base64.b64encode(digest).decode()


@dataclass
class Reply:
    """One scripted answer (``calls`` are ``(name, arguments)`` pairs, arguments as JSON text
    or a dict)."""

    text: str = ""
    calls: Sequence[tuple[str, Any]] = ()
    reasoning: str = "I should think about this."
    refusal: str | None = None
    incomplete: str | None = None  # max_output_tokens | content_filter
    failed: Mapping[str, Any] | None = None  # {"code": ..., "message": ...}
    error_event: Mapping[str, Any] | None = None  # an ``error`` event mid-stream
    status: int = 200
    error: Mapping[str, Any] | None = None  # the body of an HTTP error
    cut: bool = False  # a stream that ends before its terminal event
    raw: str | None = None
    usage: dict[str, int] = field(default_factory=lambda: {"input": 20, "output": 9})
    phase: str | None = None  # None: commentary beside calls, else final_answer (phased models)
    hosted: Sequence[Mapping[str, Any]] = ()  # hosted tool items (web_search_call...), first
    annotations: Sequence[Mapping[str, Any]] = ()  # url_citation annotations of the text


@dataclass
class Received:
    """One request the twin answered (``status`` is what it answered)."""

    body: dict[str, Any]
    status: int = 200


def openai_error(status: int, message: str, code: str | None, param: str | None) -> web.Response:
    body = {
        "error": {
            "message": message,
            "type": "invalid_request_error",
            "param": param,
            "code": code,
        }
    }
    return web.json_response(body, status=status)


class Refusal(Exception):
    """A rule broken: the status and OpenAI's error."""

    def __init__(
        self, status: int, message: str, code: str | None = None, param: str | None = None
    ):
        super().__init__(message)
        self.status, self.message, self.code, self.param = status, message, code, param


def _bad(message: str, param: str | None, code: str | None) -> Refusal:
    return Refusal(400, message, code, param)


class ResponsesTwin:
    """The twin's state: the script, what it issued, and every request received."""

    def __init__(self, *replies: Reply, key: str = "twin-key", secret: bytes = KEY) -> None:
        self.script = list(replies)
        self.key = key
        self.secret = secret  # the organisation's: another twin's blobs do not verify here
        self.unphased: list[int] = []  # requests (by number) that sent an assistant message
        # of a phased model back without its phase: not a 400, but the model degrades
        self.received: list[Received] = []
        self.calls: dict[str, tuple[str, str | None]] = {}  # call_id -> (fc id, rs id)
        self.hosted: dict[str, dict[str, Any]] = {}  # hosted tool items issued, by id
        self.count = 0
        self.model = ""  # the model of the request being checked

    def app(self) -> web.Application:
        """The aiohttp application (serve it with ``conftest.serve_app``; base URL + ``/v1``)."""
        app = web.Application(client_max_size=64 * 1024 * 1024)  # media bodies are large
        app.router.add_post("/v1/responses", self._handle)
        return app

    @property
    def accepted(self) -> list[dict[str, Any]]:
        """The bodies of the requests answered with 200."""
        return [r.body for r in self.received if r.status == 200]

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        keyed = request.headers.get("Authorization") == f"Bearer {self.key}"
        return await self.answer(request, keyed=keyed)

    async def answer(self, request: web.Request, *, keyed: bool = True) -> web.StreamResponse:
        """Answer ``request`` by the rules (``keyed``: its credential was checked and holds).

        Another front (the Azure twin, which checks ``api-key``) serves its requests here.
        """
        body = await request.json()
        record = Received(body)
        self.received.append(record)
        try:
            if not keyed:
                raise Refusal(401, "Incorrect API key provided.", "invalid_api_key")
            self.check(body)
        except Refusal as refusal:
            record.status = refusal.status
            return openai_error(refusal.status, refusal.message, refusal.code, refusal.param)
        if not self.script:
            record.status = 500
            return openai_error(500, "twin: the script is exhausted", "server_error", None)
        reply = self.script.pop(0)
        record.status = reply.status
        if reply.error is not None:
            return web.json_response(reply.error, status=reply.status)
        if reply.raw is not None:
            return web.Response(body=reply.raw.encode(), content_type="text/event-stream")
        response = self.response(reply, body)
        if body.get("stream"):
            return await self._sse(request, reply, response)
        return web.json_response(response)

    # -- rules --------------------------------------------------------------------------------

    def check(self, body: Mapping[str, Any]) -> None:
        """Raise ``Refusal`` for the first rule ``body`` breaks."""
        model = self.model = str(body.get("model"))
        for name in ("stop", "seed"):
            if name in body:
                hint = " Did you mean 'store'?" if name == "stop" else ""
                raise Refusal(400, f"Unknown parameter: '{name}'.{hint}", "unknown_parameter", name)
        if "max_tokens" in body:
            raise Refusal(
                400,
                "Unsupported parameter: 'max_tokens'. In the Responses API, this parameter has "
                "moved to 'max_output_tokens'.",
                "unsupported_parameter",
                "max_tokens",
            )
        if is_reasoning(model):
            self._sampling(body)
            self._effort(model, (body.get("reasoning") or {}).get("effort"))
        if body.get("store") is not False:
            raise Refusal(400, "twin: store must be false (SPEC 16: no state on OpenAI's side)")
        if "reasoning.encrypted_content" in (body.get("include") or []) and not is_reasoning(model):
            raise Refusal(400, NO_ENCRYPTION, None, "include")
        self._schemas(body)
        searching = search_problem(body, model)
        if searching is not None:
            raise Refusal(400, searching[0], None, searching[1])
        self._items(list(body.get("input") or []))

    def _sampling(self, body: Mapping[str, Any]) -> None:
        """Rule 1 (the Responses API's wording): only the default temperature, no top_p."""
        for name in ("temperature", "top_p"):
            if name in body and not (name == "temperature" and body[name] == 1):
                raise Refusal(
                    400,
                    f"Unsupported parameter: '{name}' is not supported with this model.",
                    "unsupported_parameter",
                    name,
                )

    def _effort(self, model: str, effort: object) -> None:
        """OpenAI 2026 2-3: an effort the model lacks, in OpenAI's words."""
        accepted = efforts(model)
        if effort is None or effort in accepted:
            return
        listed = ", ".join(f"'{e}'" for e in accepted[:-1])
        listed = f"{listed}, and '{accepted[-1]}'" if listed else f"'{accepted[-1]}'"
        raise Refusal(
            400,
            f"Unsupported value: 'reasoning_effort' does not support {effort!r} with this "
            f"model. Supported values are: {listed}.",
            "unsupported_value",
            "reasoning.effort",
        )

    def _schemas(self, body: Mapping[str, Any]) -> None:
        for tool in body.get("tools") or []:
            if tool.get("type") != "function":  # a hosted tool (web_search...): no schema
                continue
            if tool.get("strict", True):
                self._strict(tool["parameters"], f"function '{tool['name']}'")
        text_format = (body.get("text") or {}).get("format") or {}
        if text_format.get("type") == "json_schema" and text_format.get("strict"):
            self._strict(text_format["schema"], f"response_format '{text_format['name']}'")

    def _strict(self, schema: Any, what: str, context: str = "()") -> None:
        if not isinstance(schema, Mapping):
            return
        properties = schema.get("properties")
        if schema.get("type") == "object" or isinstance(properties, Mapping):
            prefix = f"Invalid schema for {what}: In context={context}, "
            if schema.get("additionalProperties") is not False:
                raise Refusal(
                    400,
                    prefix + "'additionalProperties' is required to be supplied and to be false.",
                    "invalid_function_parameters",
                    "tools",
                )
            missing = [n for n in properties or {} if n not in (schema.get("required") or [])]
            if missing:
                raise Refusal(
                    400,
                    prefix + "'required' is required to be supplied and to be an array including "
                    f"every key in properties. Missing '{missing[0]}'.",
                    "invalid_function_parameters",
                    "tools",
                )
            for name, sub in (properties or {}).items():
                self._strict(sub, what, f"('properties', '{name}')")
        for key in ("items", "anyOf", "$defs"):
            value = schema.get(key)
            if isinstance(value, Mapping):
                subs = list(value.values()) if key == "$defs" else [value]
            else:
                subs = value if isinstance(value, list) else []
            for sub in subs:
                self._strict(sub, what, context)

    def _items(self, items: list[Mapping[str, Any]]) -> None:
        reasonings: set[str] = set()  # reasoning ids since the last user message or tool output
        calls: set[str] = set()
        for index, item in enumerate(items):
            kind = item.get("type", "message")
            if kind == "reasoning":
                self._reasoning(item, items[index + 1 :])
                reasonings.add(item["id"])
            elif kind == "function_call":
                self._call(item, reasonings)
                calls.add(item["call_id"])
            elif kind == "function_call_output":
                if item.get("call_id") not in calls:
                    raise Refusal(
                        400,
                        "No tool call found for function call output with call_id "
                        f"{item.get('call_id')}.",
                        None,
                        "input",
                    )
                check_content(f"input[{index}].output", item.get("output"), self.model, _bad)
                reasonings = set()
            elif kind == "message":
                if item.get("role") not in ("user", "assistant", "system", "developer"):
                    raise Refusal(400, f"Invalid value: '{item.get('role')}'.", None, "input")
                if item.get("role") != "assistant":
                    check_content(f"input[{index}].content", item.get("content"), self.model, _bad)
                    reasonings = set()
                else:
                    self._phase(item)
            elif kind == "tool_search_output" or str(kind).endswith("_call"):
                self._hosted(item)
            else:
                raise Refusal(400, f"Invalid value: '{kind}'.", "invalid_value", "input")

    def _hosted(self, item: Mapping[str, Any]) -> None:
        """A hosted tool's item goes back as issued (store=false: nothing kept server-side)."""
        issued = self.hosted.get(str(item.get("id")))
        if issued is None or issued != dict(item):
            raise Refusal(
                404,
                f"Item with id '{item.get('id')}' not found. Items are not persisted when "
                "`store` is set to false. Try again with `store` set to true, or remove this "
                "item from your input.",
                None,
                "input",
            )

    def _phase(self, item: Mapping[str, Any]) -> None:
        """Rule 7: a phased model's assistant messages come back with their ``phase``."""
        if _PHASED.fullmatch(self.model.rpartition("/")[2]) and "phase" not in item:
            self.unphased.append(len(self.received))
        elif item.get("phase", "commentary") not in ("commentary", "final_answer"):
            raise Refusal(400, f"Invalid value: '{item['phase']}'.", "invalid_value", "input")

    def _reasoning(self, item: Mapping[str, Any], after: list[Mapping[str, Any]]) -> None:
        rs = item.get("id")
        if not isinstance(rs, str) or not isinstance(item.get("summary"), list):
            raise Refusal(400, "Missing required parameter: 'input[].summary'.", None, "input")
        content = item.get("encrypted_content")
        if content is None:
            raise Refusal(404, NOT_FOUND.format(rs=rs), None, "input")
        if content != encrypt(rs, self.secret):
            short = f"{content[:4]}...{content[-4:]}"
            raise Refusal(400, UNVERIFIED.format(short=short), "invalid_encrypted_content")
        following = after[0] if after else {}
        output = str(following.get("type")).endswith("_call") or (
            following.get("type", "message") == "message" and following.get("role") == "assistant"
        )
        if not output:  # the item a reasoning item produced comes right after it
            raise Refusal(400, NO_FOLLOWING.format(rs=rs), None, "input")

    def _call(self, item: Mapping[str, Any], reasonings: set[str]) -> None:
        if not isinstance(item.get("arguments"), str) or not item.get("call_id"):
            raise Refusal(400, "Missing required parameter: 'input[].call_id'.", None, "input")
        issued = self.calls.get(item["call_id"])
        if issued is not None and issued[1] is not None and issued[1] not in reasonings:
            raise Refusal(400, MISSING_REASONING.format(fc=issued[0], rs=issued[1]), None, "input")

    # -- replies ------------------------------------------------------------------------------

    def response(self, reply: Reply, body: Mapping[str, Any]) -> dict[str, Any]:
        """The ``response`` object for ``reply`` (the calls and reasoning it issues recorded)."""
        self.count += 1
        n = self.count
        model = str(body.get("model"))
        output: list[dict[str, Any]] = []
        rs = None
        if is_reasoning(model):
            rs = f"rs_twin{n}"
            asked = bool((body.get("reasoning") or {}).get("summary"))
            summary = [{"type": "summary_text", "text": reply.reasoning}] if asked else []
            item: dict[str, Any] = {"type": "reasoning", "id": rs, "summary": summary}
            if "reasoning.encrypted_content" in (body.get("include") or []):
                item["encrypted_content"] = encrypt(rs, self.secret)
            output.append(item)
        for hosted in reply.hosted:  # SPEC 24: sent back, each must come back unchanged
            self.hosted[str(hosted["id"])] = dict(hosted)
            output.append(dict(hosted))
        content: list[dict[str, Any]] = []
        if reply.text:
            notes = [dict(n) for n in reply.annotations]
            content.append({"type": "output_text", "text": reply.text, "annotations": notes})
        if reply.refusal is not None:
            content.append({"type": "refusal", "refusal": reply.refusal})
        if content:
            message = {"type": "message", "id": f"msg_twin{n}", "role": "assistant",
                       "status": "completed", "content": content}  # fmt: skip
            if _PHASED.fullmatch(model.rpartition("/")[2]):
                message["phase"] = reply.phase or ("commentary" if reply.calls else "final_answer")
            output.append(message)
        for i, (name, arguments) in enumerate(reply.calls):
            call_id, fc = f"call_twin{n}_{i}", f"fc_twin{n}_{i}"
            self.calls[call_id] = (fc, rs)
            raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
            output.append(
                {"type": "function_call", "id": fc, "call_id": call_id, "name": name,
                 "arguments": raw, "status": "completed"}
            )  # fmt: skip
        return self._envelope(reply, n, model, output)

    def _envelope(
        self, reply: Reply, n: int, model: str, output: list[dict[str, Any]]
    ) -> dict[str, Any]:
        status = "failed" if reply.failed else "incomplete" if reply.incomplete else "completed"
        reasoning = 6 if any(item["type"] == "reasoning" for item in output) else 0
        return {
            "id": f"resp_twin{n}",
            "object": "response",
            "status": status,
            "model": f"{model}-2026-01-01",
            "output": output,
            "error": dict(reply.failed) if reply.failed else None,
            "incomplete_details": {"reason": reply.incomplete} if reply.incomplete else None,
            "usage": {
                "input_tokens": reply.usage["input"],
                "input_tokens_details": {"cached_tokens": 4},
                "output_tokens": reply.usage["output"] + reasoning,
                "output_tokens_details": {"reasoning_tokens": reasoning},
                "total_tokens": reply.usage["input"] + reply.usage["output"] + reasoning,
            },
        }

    def events(self, reply: Reply, response: dict[str, Any]) -> list[dict[str, Any]]:
        """The stream events of ``response``, in OpenAI's order (without sequence numbers)."""
        head = {**response, "status": "in_progress", "output": [], "usage": None}
        events: list[dict[str, Any]] = [
            {"type": "response.created", "response": head},
            {"type": "response.in_progress", "response": head},
        ]
        for index, item in enumerate(response["output"]):
            events += _item_events(index, item)
            if reply.error_event is not None and index == 0:
                return [*events, {"type": "error", **reply.error_event}]
        if reply.cut:
            return events[: max(2, len(events) - 1)]
        terminal = {"failed": "response.failed", "incomplete": "response.incomplete"}
        kind = terminal.get(response["status"], "response.completed")
        return [*events, {"type": kind, "response": response}]

    async def _sse(
        self, request: web.Request, reply: Reply, response: dict[str, Any]
    ) -> web.StreamResponse:
        stream = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await stream.prepare(request)
        for number, event in enumerate(self.events(reply, response)):
            event = {**event, "sequence_number": number}
            await stream.write(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode())
        await stream.write_eof()
        return stream


def _pieces(text: str) -> list[str]:
    return [text[i : i + 5] for i in range(0, len(text), 5)] or [""]


def _item_events(index: int, item: dict[str, Any]) -> list[dict[str, Any]]:
    """``output_item.added``, the deltas, ``output_item.done`` for one output item."""
    base = {"output_index": index, "item_id": item["id"]}
    opened = {**item}
    events: list[dict[str, Any]] = []
    if item["type"] == "reasoning":
        opened = {**item, "summary": [], "encrypted_content": None}
        for s, part in enumerate(item["summary"]):
            opened_part = {"type": "summary_text", "text": ""}
            events.append({"type": "response.reasoning_summary_part.added", **base,
                           "summary_index": s, "part": opened_part})  # fmt: skip
            events += [
                {"type": "response.reasoning_summary_text.delta", **base, "summary_index": s,
                 "delta": piece}
                for piece in _pieces(part["text"])
            ]  # fmt: skip
    elif item["type"] == "message":
        opened = {**item, "content": [], "status": "in_progress"}
        for c, part in enumerate(item["content"]):
            kind = "output_text" if part["type"] == "output_text" else "refusal"
            text = part.get("text", part.get("refusal", ""))
            events += [
                {"type": f"response.{kind}.delta", **base, "content_index": c, "delta": piece}
                for piece in _pieces(text)
            ]
    elif item["type"] == "function_call":
        opened = {**item, "arguments": "", "status": "in_progress"}
        events += [
            {"type": "response.function_call_arguments.delta", **base, "delta": piece}
            for piece in _pieces(item["arguments"])
        ]
    added = {"type": "response.output_item.added", "output_index": index, "item": opened}
    done = {"type": "response.output_item.done", "output_index": index, "item": item}
    return [added, *events, done]
