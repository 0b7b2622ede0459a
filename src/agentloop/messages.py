"""Messages and their parts: the frozen values every layer shares.

A ``Message`` never changes once built, so a provider adapter may encode its wire form once and
reuse it (``Message.encoded``): the cost of a turn does not grow with the conversation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import field
from typing import Any, Literal, TypeAlias

from agentloop._provider_parts import (
    NO_CALLS,
    Citation,
    ProviderPart,
    ProviderToolCallPart,
    ProviderToolResultPart,
    citations_from,
    counted_calls,
    provider_part_from_dict,
)
from agentloop._run_input import INPUT_HELP, input_text, refused_input
from agentloop._tool_parts import ToolChangePart
from agentloop._util.depth import MAX_ARGUMENT_DEPTH, _cut, _too_deep
from agentloop._util.slots import record
from agentloop.errors import InvalidInput
from agentloop.media import AudioPart, DocumentPart, ImagePart, MediaPart, media_from_dict

__all__ = [
    "MAX_ARGUMENT_DEPTH",
    "AudioPart",
    "Citation",
    "DocumentPart",
    "ImagePart",
    "MediaPart",
    "Message",
    "Part",
    "ProviderPart",
    "ProviderToolCallPart",
    "ProviderToolResultPart",
    "Role",
    "TextPart",
    "ThinkingPart",
    "ToolCallPart",
    "ToolChangePart",
    "ToolResultPart",
    "Usage",
    "UserInput",
    "input_text",
]

Role: TypeAlias = Literal["system", "user", "assistant", "tool"]
_ROLES = ("system", "user", "assistant", "tool")
_SCALARS = frozenset({str, int, float, bool, type(None)})  # argument values that hold nothing


@record
class TextPart:
    """Plain text; ``citations``: where its words came from (a provider's web search, SPEC 24)."""

    text: str
    citations: tuple[Citation, ...] = field(default=(), kw_only=True)

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form (``citations`` only when there are some)."""
        if self.citations:
            cited = [c.to_dict() for c in self.citations]
            return {"type": "text", "text": self.text, "citations": cited}
        return {"type": "text", "text": self.text}


@record
class ToolCallPart:
    """The model asks for a tool to run.

    Arguments nested deeper than ``MAX_ARGUMENT_DEPTH`` are cut where they enter (whatever
    the source: a provider's decoded JSON, a test double, a client of your own): each
    container one level past the limit is kept empty and what it held is dropped. Every
    encoder downstream (token counts, the store, a provider replaying the transcript, the
    loop detector) would otherwise recurse a thousand frames deep; the cut tree is still too
    deep, so the engine answers the call with ``Invalid arguments`` instead of running it.
    """

    id: str
    name: str
    arguments: Mapping[str, Any]

    def __post_init__(self) -> None:
        for value in self.arguments.values():
            if type(value) not in _SCALARS:  # not isinstance(Mapping), an ABC: a container's depth
                if _too_deep(self.arguments):
                    object.__setattr__(self, "arguments", _cut(self.arguments))
                return

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form."""
        return {
            "type": "tool_call",
            "id": self.id,
            "name": self.name,
            "arguments": dict(self.arguments),
        }


@record
class ToolResultPart:
    """What a tool call produced; ``is_error`` marks a soft error the model reads.

    ``media``: images, documents or audio the tool returned beside its text (SPEC 16). The
    adapter puts them in the tool result where its provider allows it (Anthropic ``tool_result``
    content, Gemini 3 function responses), else in a user message right after the results.
    """

    call_id: str
    name: str
    content: str
    is_error: bool = False
    media: tuple[MediaPart, ...] = field(default=(), kw_only=True)

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form (``media`` only when there is some)."""
        data: dict[str, Any] = {
            "type": "tool_result",
            "call_id": self.call_id,
            "name": self.name,
            "content": self.content,
            "is_error": self.is_error,
        }
        if self.media:
            data["media"] = [m.to_dict() for m in self.media]
        return data


@record
class ThinkingPart:
    """The model's reasoning, kept in the transcript so it can be sent back (SPEC 16).

    ``text`` is the readable thinking or its summary ("" when the provider sends none);
    ``signature`` the provider's opaque token (Anthropic ``signature``, or the ``data`` of a
    ``redacted_thinking`` block with ``redacted=True``; OpenAI Responses ``encrypted_content``;
    Gemini ``thoughtSignature``); ``provider`` the provider that wrote it (an adapter sends back
    only its own provider's parts, unchanged and in place); ``id`` the provider's id for it
    (an OpenAI Responses reasoning item's ``rs_...``).

    Gemini signs a part rather than sending a block: a ``thoughtSignature`` on a function call
    or text part is a ``ThinkingPart(text="", signature=...)`` placed right before that part.

    ``origin`` says which endpoint or model wrote it, where the provider reads a signature
    only there (SPEC 16): an OpenAI Responses endpoint's identity (its host and a fingerprint
    of its organisation, never the key itself) or the Gemini model's name. An adapter leaves a
    part out where its origin differs from the target's; None (parts stored before origins
    were recorded, or written by hand) is sent as before. It takes no part in ``==``.
    """

    text: str
    signature: str | None = field(default=None, kw_only=True)
    redacted: bool = field(default=False, kw_only=True)
    provider: str | None = field(default=None, kw_only=True)
    id: str | None = field(default=None, kw_only=True)
    origin: str | None = field(default=None, kw_only=True, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form (optional fields only when set)."""
        data: dict[str, Any] = {"type": "thinking", "text": self.text}
        if self.signature is not None:
            data["signature"] = self.signature
        if self.redacted:
            data["redacted"] = True
        if self.provider is not None:
            data["provider"] = self.provider
        if self.id is not None:
            data["id"] = self.id
        if self.origin is not None:
            data["origin"] = self.origin
        return data


Part: TypeAlias = (
    TextPart | ThinkingPart | ToolCallPart | ToolResultPart | ImagePart | DocumentPart | AudioPart
    | ProviderToolCallPart | ProviderToolResultPart | ToolChangePart | ProviderPart
)  # fmt: skip
"""Every kind of message part: text, reasoning, tool calls and results, media (SPEC 16), a
provider's own calls, results and blocks (SPEC 24, 28) and a system entry's tool change."""


def _media_list(items: Iterable[Any]) -> Iterable[MediaPart]:
    for item in items:
        media = media_from_dict(item) if isinstance(item, Mapping) else None
        if media is None:
            raise InvalidInput(f"a tool result's media entry is not a media part: {item!r:.80}")
        yield media


def _opt_str(data: Mapping[str, Any], key: str) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidInput(f"thinking part field {key!r} must be a string, got {value!r}")
    return value


def _part_from_dict(data: Mapping[str, Any]) -> Part:
    kind = data.get("type")
    if kind == "text":
        cited = data.get("citations")
        return TextPart(str(data["text"]), citations=citations_from(cited) if cited else ())
    if kind == "tool_call":
        return ToolCallPart(str(data["id"]), str(data["name"]), dict(data.get("arguments") or {}))
    if kind == "thinking":
        return ThinkingPart(
            str(data.get("text", "")),
            signature=_opt_str(data, "signature"),
            redacted=bool(data.get("redacted", False)),
            provider=_opt_str(data, "provider"),
            id=_opt_str(data, "id"),
            origin=_opt_str(data, "origin"),
        )
    if kind == "tool_result":
        return ToolResultPart(
            str(data["call_id"]),
            str(data["name"]),
            str(data["content"]),
            bool(data.get("is_error", False)),
            media=tuple(_media_list(data.get("media") or ())),
        )
    if kind == "tool_change":
        return ToolChangePart.from_dict(data)
    if kind == "provider":
        return ProviderPart(str(data["provider"]), str(data["kind"]), dict(data["data"]))
    if kind in ("provider_tool_call", "provider_tool_result"):
        return provider_part_from_dict(data)
    media = media_from_dict(data)
    if media is not None:
        return media
    raise InvalidInput(f"unknown message part type: {kind!r}")


UserInput: TypeAlias = "str | Sequence[str | ImagePart | DocumentPart | AudioPart]"
"""What ``run()``, ``run_sync()`` and ``stream()`` take: text, or text and media in order."""


@record
class Message:
    """One message of a conversation: a role and its parts (any iterable becomes a tuple).

    ``phase`` is an OpenAI Responses assistant message's ``phase`` (``"commentary"`` or
    ``"final_answer"``), kept so the adapter sends it back on every later request (SPEC 16);
    None elsewhere. It takes no part in ``==``.
    """

    role: Role
    parts: tuple[Part, ...]
    phase: str | None = field(default=None, kw_only=True, compare=False)
    _wire: dict[str, Any] = field(
        default_factory=dict, init=False, repr=False, compare=False, hash=False
    )

    def __post_init__(self) -> None:
        if self.role not in _ROLES:
            raise InvalidInput(f"message role must be one of {_ROLES}, got {self.role!r}")
        if type(self.parts) is not tuple and not isinstance(self.parts, tuple):  # (no call)
            object.__setattr__(self, "parts", tuple(self.parts))

    @classmethod
    def system(cls, text: str) -> Message:
        """A system message."""
        return cls("system", (TextPart(text),))

    @classmethod
    def user(cls, text: str) -> Message:
        """A user message."""
        return cls("user", (TextPart(text),))

    @classmethod
    def from_input(cls, input: UserInput) -> Message:
        """The user message of a run's ``input``: a ``str``, or a sequence of ``str`` and media.

        Raises:
            InvalidInput: The input is neither, or an empty sequence; the message says what fits.
        """
        if type(input) is str:  # a run's usual input: nothing to check (no call)
            return cls("user", (TextPart(input),))
        refused = refused_input(input)
        if refused is not None:
            raise InvalidInput(refused)
        if isinstance(input, str):
            return cls("user", (TextPart(input),))
        parts: list[Part] = []
        for item in input:
            if isinstance(item, str):
                parts.append(TextPart(item))
            elif isinstance(item, ImagePart | DocumentPart | AudioPart):
                parts.append(item)
            else:
                raise InvalidInput(INPUT_HELP.format(got=f"a sequence holding {item!r:.60}"))
        if not parts:
            raise InvalidInput(INPUT_HELP.format(got="an empty sequence"))
        return cls("user", tuple(parts))

    @classmethod
    def assistant(cls, text: str = "", calls: Iterable[ToolCallPart] = ()) -> Message:
        """An assistant message with optional text and tool calls."""
        parts: list[Part] = [TextPart(text)] if text else []
        parts.extend(calls)
        return cls("assistant", tuple(parts))

    @classmethod
    def tool_results(cls, results: Iterable[ToolResultPart]) -> Message:
        """The one ``tool`` message carrying a turn's results, in the model's order."""
        return cls("tool", tuple(results))

    @property
    def text(self) -> str:
        """All text parts joined (empty when there are none); computed once."""
        parts = self.parts
        if len(parts) == 1 and type(parts[0]) is TextPart:  # one text: itself (nothing kept)
            return parts[0].text
        text: str | None = self._wire.get(":text")
        if text is None:
            text = self._wire[":text"] = "".join(p.text for p in parts if isinstance(p, TextPart))
        return text

    @property
    def thinking(self) -> tuple[ThinkingPart, ...]:
        """The reasoning parts this message carries."""
        return tuple(p for p in self.parts if isinstance(p, ThinkingPart))

    @property
    def tool_calls(self) -> tuple[ToolCallPart, ...]:
        """The tool calls this message asks for; computed once."""
        calls: tuple[ToolCallPart, ...] | None = self._wire.get(":calls")
        if calls is None:
            parts: Any = self.parts  # one call: its parts are its calls (no tuple made, kept)
            one = type(parts[0]) if len(parts) == 1 else None
            if one is TextPart:  # one text (an answer): no calls, no generator
                parts = ()
            elif one is not ToolCallPart:
                parts = tuple(p for p in parts if isinstance(p, ToolCallPart))
            calls = self._wire[":calls"] = parts
        return calls

    @property
    def tool_results_parts(self) -> tuple[ToolResultPart, ...]:
        """The tool results this message carries; computed once."""
        results: tuple[ToolResultPart, ...] | None = self._wire.get(":results")
        if results is None:
            results = self._wire[":results"] = tuple(
                p for p in self.parts if isinstance(p, ToolResultPart)
            )
        return results

    def encoded(self, key: str, encode: Callable[[Message], Any]) -> Any:
        """The wire form under ``key``, computed by ``encode`` once and then reused."""
        cached = self._wire.get(key)
        if cached is None:
            cached = encode(self)
            self._wire[key] = cached
        return cached

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form; ``Message.from_dict`` reverses it losslessly."""
        data: dict[str, Any] = {"role": self.role, "parts": [p.to_dict() for p in self.parts]}
        if self.phase is not None:
            data["phase"] = self.phase
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Message:
        """Rebuild a message from ``to_dict`` output."""
        parts = tuple(_part_from_dict(p) for p in data.get("parts", ()))
        return cls(data["role"], parts, phase=_opt_str(data, "phase"))


@record
class Usage:
    """Token counts reported by the provider.

    ``input_tokens`` is the prompt's whole size, cached tokens included (the OpenTelemetry GenAI
    convention and what every provider bills against). ``cache_read_tokens`` (served from the
    provider's prompt cache) and ``cache_write_tokens`` (written to it, Anthropic only) are the
    parts of ``input_tokens`` that were cached; ``uncached_input_tokens`` is the rest. Positional
    construction ``Usage(input, output)`` is unchanged; the cache counts are 0 when unknown.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0
    """The part of ``output_tokens`` the model spent reasoning (0 when unknown)."""
    provider_tool_calls: Mapping[str, int] = field(default=NO_CALLS, kw_only=True, hash=False)
    """Calls of the provider's own tools by kind (``{"web_search": 2}``, SPEC 24)."""

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens

    @property
    def uncached_input_tokens(self) -> int:
        """Input tokens neither read from nor written to the cache (never negative)."""
        return max(0, self.input_tokens - self.cache_read_tokens - self.cache_write_tokens)

    def __add__(self, other: Usage) -> Usage:
        calls = other.provider_tool_calls  # the shared empty one is told by identity (no call)
        mine = self.provider_tool_calls
        calls = mine if calls is NO_CALLS or not calls else counted_calls(mine, calls, 1)
        total = Usage(  # positional: a keyword would cost the call a dict (set below instead)
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
            self.reasoning_tokens + other.reasoning_tokens,
        )
        if calls is not NO_CALLS:  # what ``provider_tool_calls=calls`` sets, without its dict
            object.__setattr__(total, "provider_tool_calls", calls)
        return total

    def __sub__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens - other.input_tokens,
            self.output_tokens - other.output_tokens,
            self.cache_read_tokens - other.cache_read_tokens,
            self.cache_write_tokens - other.cache_write_tokens,
            self.reasoning_tokens - other.reasoning_tokens,
            provider_tool_calls=counted_calls(
                self.provider_tool_calls, other.provider_tool_calls, -1
            ),
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form; the cache counts appear only when non-zero (older rows lack them)."""
        data: dict[str, Any] = {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
        }
        if self.cache_read_tokens:
            data["cache_read_tokens"] = self.cache_read_tokens
        if self.cache_write_tokens:
            data["cache_write_tokens"] = self.cache_write_tokens
        if self.reasoning_tokens:
            data["reasoning_tokens"] = self.reasoning_tokens
        if self.provider_tool_calls is not NO_CALLS and self.provider_tool_calls:
            data["provider_tool_calls"] = dict(self.provider_tool_calls)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Usage:
        """Rebuild from ``to_dict`` output (a missing count is 0)."""
        return cls(
            int(data.get("input_tokens", 0)),
            int(data.get("output_tokens", 0)),
            int(data.get("cache_read_tokens", 0)),
            int(data.get("cache_write_tokens", 0)),
            int(data.get("reasoning_tokens", 0)),
            provider_tool_calls={
                str(k): int(v) for k, v in (data.get("provider_tool_calls") or {}).items()
            },
        )
