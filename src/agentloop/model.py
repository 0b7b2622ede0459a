"""What the engine and every provider share: the ``ModelClient`` protocol and its values.

The engine talks to any ``ModelClient`` (a provider adapter, ``RetryingClient``,
``FallbackClient`` or a test model) and never imports ``providers/``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import field, replace
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias, runtime_checkable

from agentloop._tool_parts import ToolSpec, apply_changes
from agentloop._util.aio import AsyncClosing
from agentloop._util.peers import hint_init
from agentloop._util.slots import record
from agentloop.errors import ConfigurationError
from agentloop.messages import Message, ToolCallPart, ToolChangePart, Usage

if TYPE_CHECKING:  # declarations load only for an agent that has some
    from agentloop.provider_tools import ProviderTool

__all__ = [
    "INVALID_JSON_KEY",
    "MEDIA_KINDS",
    "REASONING_EFFORTS",
    "ClientEvents",
    "ClosableModelClient",
    "ModelClient",
    "ModelRequest",
    "ModelResponse",
    "ModelSettings",
    "OutputSpec",
    "ReasoningEffort",
    "StreamEvent",
    "StreamEventKind",
    "ToolSpec",
    "WrappedClient",
    "compacts_on_server",
    "is_append_only",
    "media_kinds",
    "media_provider",
    "with_tool_changes",
]

ReasoningEffort: TypeAlias = Literal["none", "minimal", "low", "medium", "high", "xhigh", "max"]
REASONING_EFFORTS: tuple[ReasoningEffort, ...] = (
    "none",
    "minimal",
    "low",
    "medium",
    "high",
    "xhigh",
    "max",
)
"""Every ``reasoning_effort`` value; which ones a model takes is its profile's ``efforts``."""

INVALID_JSON_KEY = "__invalid_json__"
"""A tool call whose argument text is not a JSON object carries ``{INVALID_JSON_KEY: raw}``.

Adapters put it there (the raw text as the model sent it); the engine answers such a call with a
soft "Invalid arguments" result instead of running the tool, and an adapter sends the raw text
back verbatim when the call is replayed in a transcript.
"""


_SAMPLING_EXTRA = "not an option here; extra_body={...} forwards it to the provider as is"


@hint_init(
    {
        "stop_sequences": "stop=(...)",
        "max_output_tokens": "max_tokens=",
        "parallel_tool_calls": "RunConfig(parallel_tool_calls=True) runs one turn's calls "
        "concurrently",
        "reasoning": "reasoning_effort='low' (or thinking_budget=<tokens>)",
        "thinking": "thinking_budget=<tokens> (or reasoning_effort=)",
        "timeout": "timeouts belong to the client: Settings(timeout=...)",
        "reset_tool_choice": "tool_choice_once=True",
        "response_format": "Agent(output_type=...), with RunConfig(output_mode='native')",
        "frequency_penalty": _SAMPLING_EXTRA,
        "presence_penalty": _SAMPLING_EXTRA,
        "logit_bias": _SAMPLING_EXTRA,
        "extra_headers": "headers are not a model setting here (extra_body= adds body fields)",
    }
)
@record
class ModelSettings:
    """Sampling options forwarded on every request.

    ``tool_choice`` is ``"auto"``, ``"required"``, ``"none"`` or a tool name. An adapter that
    cannot forward an option raises ``ConfigurationError`` instead of dropping it.
    ``tool_choice_once=True`` applies ``tool_choice`` to the first turn of a run only; later
    turns ask with ``"auto"``, so forcing one tool call does not force it again and again.

    ``cache`` (default True) lets adapters help the provider's prompt cache: Anthropic
    ``cache_control`` breakpoints, OpenAI's ``prompt_cache_key``. ``cache=False`` sends neither
    (every adapter can honour it; providers that cache on their own still may).
    """

    temperature: float | None = None
    max_tokens: int | None = None
    top_p: float | None = None
    stop: tuple[str, ...] | None = None
    seed: int | None = None
    tool_choice: str | None = None
    extra_body: Mapping[str, Any] | None = None
    cache: bool = True
    reasoning_effort: ReasoningEffort | None = None
    """How hard a reasoning model thinks: each provider's own form (OpenAI ``reasoning_effort`` /
    ``reasoning.effort``, Gemini 3 ``thinkingLevel``, Claude 4.7 and later adaptive thinking's
    ``output_config.effort``, earlier Claude a documented table of budgets); a
    ``ConfigurationError`` before any request where the model cannot take it (``xhigh``: OpenAI
    after gpt-5.1-codex-max and Claude 4.7+; ``max``: gpt-5.6-sol and Claude 4.7+)."""
    thinking_budget: int | None = None
    """Tokens a model may think for (Anthropic ``budget_tokens``, Gemini 2.5 ``thinkingBudget``)."""
    tool_choice_once: bool = False
    """Force ``tool_choice`` on a run's first turn only (the engine's; never sent)."""
    thinking_prefix_mismatch: Literal["drop_block"] | None = None
    """SPEC 28's escape hatch, opt-in only: ``"drop_block"`` asks an append-only Claude to drop a
    thinking block whose prefix changed instead of answering 400 (``block_binding``, with its
    beta header); the session keeps it on for its later runs, and what the provider dropped
    becomes a ``ThinkingDropped`` event. Ignored by models that are not append-only."""

    def __post_init__(self) -> None:
        for name in ("cache", "tool_choice_once"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigurationError(
                    f"ModelSettings.{name} must be a bool, got {getattr(self, name)!r}", field=name
                )
        if self.temperature is not None and not 0.0 <= self.temperature <= 2.0:
            raise ConfigurationError(
                f"ModelSettings.temperature must be in [0, 2], got {self.temperature}",
                field="temperature",
            )
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ConfigurationError(
                f"ModelSettings.max_tokens must be >= 1, got {self.max_tokens}",
                field="max_tokens",
            )
        if self.top_p is not None and not 0.0 <= self.top_p <= 1.0:
            raise ConfigurationError(
                f"ModelSettings.top_p must be in [0, 1], got {self.top_p}", field="top_p"
            )
        _check_words(self)
        budget = self.thinking_budget
        if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int)):
            raise ConfigurationError(
                f"ModelSettings.thinking_budget must be an int, got {budget!r}",
                field="thinking_budget",
            )
        if budget is not None and budget < 0:
            raise ConfigurationError(
                f"ModelSettings.thinking_budget must be >= 0, got {budget}",
                field="thinking_budget",
            )
        if self.stop is not None and not isinstance(self.stop, tuple):
            stop: Any = self.stop
            object.__setattr__(self, "stop", (stop,) if isinstance(stop, str) else tuple(stop))

    def is_default(self) -> bool:
        """True when no option is set."""
        return self == _DEFAULT_SETTINGS


_WORDS = (("reasoning_effort", REASONING_EFFORTS), ("thinking_prefix_mismatch", ("drop_block",)))


def _check_words(settings: ModelSettings) -> None:
    """A setting that takes one of a few words holds one of them (or None)."""
    for name, allowed in _WORDS:
        value = getattr(settings, name)
        if value is not None and value not in allowed:
            raise ConfigurationError(
                f"ModelSettings.{name} must be one of {allowed}, got {value!r}", field=name
            )


_DEFAULT_SETTINGS = ModelSettings()


@record
class OutputSpec:
    """The structured output a request asks for in ``"native"`` output mode.

    An adapter with native structured output (OpenAI ``response_format`` json_schema, Gemini
    ``responseSchema``) constrains the reply to ``schema``; the others never receive one (the
    engine falls back to the ``final_result`` tool for them).
    """

    name: str
    schema: Mapping[str, Any]


@record
class ModelRequest:
    """One request to a model: the transcript, the advertised tools, the options."""

    messages: Sequence[Message]
    tools: Sequence[ToolSpec] = ()
    system: str | None = None
    settings: ModelSettings = _DEFAULT_SETTINGS
    """The options (one shared default instance: a record cannot change, and an adapter keeps the
    JSON of the options it last sent while they stay the same object)."""
    model: str | None = None
    """A per-request model override (set by ``FallbackClient``); None = the client's own."""
    events: ClientEvents | None = None
    """Where wrapping clients report retries, failovers and model switches (the engine's
    observers); None when nobody listens."""
    output: OutputSpec | None = None
    """Native structured output to ask for (``RunConfig.output_mode="native"``), else None."""
    session_id: str | None = None
    """The conversation this request belongs to (the engine's ``Agent.session_id``); adapters
    derive a provider's prompt-cache key from it. None outside a session."""
    compact_at: int | None = None
    """Ask the provider to compact the conversation on its side past this many input tokens
    (SPEC 28, ``RunConfig(compaction="auto")`` on a model whose profile has it); None: never."""
    provider_tools: Sequence[ProviderTool] = ()
    """Tools the provider runs itself (SPEC 24: ``WebSearch``...); each adapter writes its own
    form, or raises ``ConfigurationError`` before sending where the provider or model lacks one."""


class ClientEvents(Protocol):
    """Callbacks a wrapping client (retrying, fallback) reports through; all synchronous."""

    def on_retry(self, error: BaseException, attempt: int, wait_seconds: float) -> None:
        """An attempt failed with ``error``; attempt ``attempt + 1`` follows after a wait."""
        ...

    def on_fallback(self, from_model: str, to_model: str, error: BaseException) -> None:
        """``from_model`` failed; the request moves on to ``to_model``."""
        ...

    def on_model_switched(self, from_model: str, to_model: str) -> None:
        """The model serving requests changed."""
        ...


@record
class ModelResponse:
    """A complete reply: one assistant message, its usage, the model that served it."""

    message: Message
    usage: Usage = field(default_factory=Usage)
    model: str = ""
    stop_reason: str | None = None
    request_id: str | None = None
    thinking_dropped: tuple[Mapping[str, Any], ...] = field(default=(), kw_only=True)
    """The thinking blocks the provider dropped from the request, as it listed them (Anthropic's
    ``input_transformations`` under ``thinking_prefix_mismatch="drop_block"``, SPEC 28)."""

    @property
    def text(self) -> str:
        """The reply's text."""
        return self.message.text

    @property
    def tool_calls(self) -> tuple[ToolCallPart, ...]:
        """The tool calls the reply asks for."""
        return self.message.tool_calls


StreamEventKind: TypeAlias = Literal[
    "text_delta", "thinking_delta", "tool_call_delta", "attempt_reset", "done"
]


@record
class StreamEvent:
    """One streaming event.

    ``text_delta`` carries ``text``; ``thinking_delta`` carries readable reasoning in ``text``
    (never an answer); ``tool_call_delta`` carries ``index``, ``call_id``, ``name``
    and an ``arguments`` fragment; ``attempt_reset`` tells consumers to discard everything
    received so far (a retry started); ``done`` is the terminal event and carries the complete
    ``response``. A stream that ends without ``done`` is incomplete and never an answer.
    """

    kind: StreamEventKind
    text: str = ""
    index: int = 0
    call_id: str | None = None
    name: str | None = None
    arguments: str = ""
    response: ModelResponse | None = None


@runtime_checkable
class ModelClient(Protocol):
    """Anything that can answer a ``ModelRequest``."""

    @property
    def model(self) -> str:
        """The model this client asks by default."""
        ...

    @property
    def provider(self) -> str:
        """The provider's name (``openai``, ``anthropic``, ``scripted``...)."""
        ...

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Send one request and return the complete reply."""
        ...

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """Send one request and yield its events; the last one is ``done``."""
        ...

    async def aclose(self) -> None:
        """Release connections."""
        ...


MEDIA_KINDS = frozenset({"image", "document", "audio"})


def media_kinds(client: object) -> frozenset[str]:
    """The media kinds ``client`` takes (``"image"``, ``"document"``, ``"audio"``).

    A client says so with an ``accepts_media`` attribute (the provider adapters, from their
    model profile); a wrapper without one answers for the client it wraps (``inner``). A client
    that says nothing (a test double, a custom client) is taken to accept every kind.
    """
    for _ in range(8):
        kinds = getattr(client, "accepts_media", None)
        if kinds is not None:
            return frozenset(kinds)
        client = getattr(client, "inner", None)
        if client is None:
            break
    return MEDIA_KINDS


def is_append_only(client: object) -> bool:
    """Whether a model ``client`` may call binds thinking to what came before (SPEC 28).

    A client says so with an ``append_only`` attribute (the Anthropic adapter, from its model
    profile; a test double may set it); a wrapper answers for what it wraps (``inner``), a
    ``FallbackClient`` for any of its ``clients``.
    """
    if getattr(client, "append_only", False) is True:
        return True
    inner, clients = getattr(client, "inner", None), getattr(client, "clients", None)
    if inner is None and not isinstance(clients, _SEQUENCES):
        return False  # the common case, a plain client: three looks and no list
    stack, seen = [client], 0
    while stack and seen < 32:
        found = stack.pop()
        seen += 1
        if getattr(found, "append_only", False) is True:
            return True
        inner = getattr(found, "inner", None)
        if inner is not None:
            stack.append(inner)
        clients = getattr(found, "clients", None)
        if isinstance(clients, _SEQUENCES):
            stack.extend(clients)
    return False


_SEQUENCES = (list, tuple)
"""What a ``clients`` attribute may be (a constant: ``list | tuple`` builds a union each time)."""


def media_provider(client: object) -> str | None:
    """The provider whose formula counts media on ``client``'s requests (SPEC 16, 7).

    Its ``provider``; None (``agentloop.media.media_tokens``: the largest of the formulas, so
    a request is never sent over the window) when they may reach more than one provider: a
    ``FallbackClient`` over models of several, also inside a wrapper (``inner``). The last
    client's answer is kept: every run of an agent asks about the same client.
    """
    global _last_media
    last = _last_media
    if last[0] is client:
        return last[1]
    provider = _media_provider(client)
    _last_media = (client, provider)
    return provider


_last_media: tuple[object, str | None] = (None, None)


def _media_provider(client: object) -> str | None:
    found: object = client
    for _ in range(8):
        clients = getattr(found, "clients", None)
        if isinstance(clients, _SEQUENCES):
            providers = {_media_provider(c) for c in clients}
            return providers.pop() if len(providers) == 1 else None
        found = getattr(found, "inner", None)
        if found is None:
            break
    provider = getattr(client, "provider", None)
    return provider if isinstance(provider, str) else None


def compacts_on_server(client: object) -> bool:
    """Whether every model ``client`` may call compacts on the provider's side (SPEC 28).

    A client says so with a ``server_compaction`` attribute (the Anthropic adapter, from its
    model profile); a wrapper answers for ``inner``, a ``FallbackClient`` for all its
    ``clients``. A client that says nothing does not.
    """
    for _ in range(8):
        said = getattr(client, "server_compaction", None)
        if isinstance(said, bool):
            return said
        clients = getattr(client, "clients", None)
        if isinstance(clients, _SEQUENCES) and clients:
            return all(compacts_on_server(c) for c in clients)
        client = getattr(client, "inner", None)
        if client is None:
            break
    return False


_ROLE = attrgetter("role")


def with_tool_changes(request: ModelRequest) -> ModelRequest:
    """``request`` with its system entries' tool changes applied to ``tools`` (SPEC 28).

    For an adapter that sends one ``tools`` list (OpenAI, Gemini, Claude without mid-conversation
    tool changes). The request itself when it has no ``system`` message (the common case, looked
    for in C: a run that is not append-only pays no Python step per message).
    """
    if "system" not in map(_ROLE, request.messages):
        return request
    changes = [
        part
        for message in request.messages
        if message.role == "system"
        for part in message.parts
        if type(part) is ToolChangePart
    ]
    if not changes:
        return request
    return replace(request, tools=apply_changes(request.tools, changes))


@runtime_checkable
class ClosableModelClient(ModelClient, AsyncClosing, Protocol):
    """A ``ModelClient`` that is also an async context manager (every built-in client is)."""


class WrappedClient(AsyncClosing):
    """A ``ModelClient`` around ``inner``: its model and provider, closing it, ``async with``.

    Wrappers subclass it and override ``complete`` and ``stream``: ``RetryingClient``, and the
    durable integrations' model calls (the journal's replay, a DBOS step, a Temporal activity).
    """

    def __init__(self, inner: ModelClient) -> None:
        """Wrap ``inner``."""
        self.inner = inner

    @property
    def model(self) -> str:
        """The inner client's model."""
        return self.inner.model

    @property
    def provider(self) -> str:
        """The inner client's provider."""
        return self.inner.provider

    async def aclose(self) -> None:
        """Close the inner client."""
        await self.inner.aclose()
