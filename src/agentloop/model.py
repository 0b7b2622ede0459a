"""What the engine and every provider share: the ``ModelClient`` protocol and its values.

The engine talks to any ``ModelClient`` (a provider adapter, ``RetryingClient``,
``FallbackClient`` or a test model) and never imports ``providers/``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import field
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias, runtime_checkable

from agentloop._util.aio import AsyncClosing
from agentloop._util.peers import hint_init
from agentloop._util.slots import record
from agentloop.errors import ConfigurationError
from agentloop.messages import Message, ToolCallPart, Usage

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
    "media_kinds",
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
        if self.reasoning_effort is not None and self.reasoning_effort not in REASONING_EFFORTS:
            raise ConfigurationError(
                f"ModelSettings.reasoning_effort must be one of {REASONING_EFFORTS}, "
                f"got {self.reasoning_effort!r}",
                field="reasoning_effort",
            )
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


_DEFAULT_SETTINGS = ModelSettings()


@record
class ToolSpec:
    """A tool as advertised to the model: name, description, JSON schema of its arguments."""

    name: str
    description: str
    parameters: Mapping[str, Any]


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
    settings: ModelSettings = field(default_factory=ModelSettings)
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
