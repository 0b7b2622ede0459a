"""``RunConfig``: every knob of a run, frozen, validated at construction.

Invalid values raise ``ConfigurationError`` naming the field, before any request is sent.
The ``0 disables`` convention holds for thresholds: ``tool_timeout=0`` means no timeout,
``context_window=0`` turns the window policy off, ``max_tool_output_chars=0`` keeps outputs whole.

``resolve_client`` is the one place a ``"provider:model"`` string becomes a client (SPEC 21):
the engine asks it and never imports ``providers/``; it imports them only when given a string,
so ``from agentloop import Agent`` loads no HTTP layer.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any, Literal

from agentloop._util.numbers import is_finite
from agentloop._util.peers import hint_init
from agentloop._util.slots import record
from agentloop.context import Compactor, TruncatingCompactor
from agentloop.errors import ConfigurationError
from agentloop.model import ModelClient, ModelSettings
from agentloop.safety.breaker import ToolBreaker
from agentloop.safety.budget import Budget
from agentloop.safety.convergence import Convergence
from agentloop.safety.loops import LoopDetection
from agentloop.safety.recovery import (
    ExponentialBackoffRecovery,
    NoopReflector,
    RecoveryStrategy,
    Reflector,
)
from agentloop.tokens import HeuristicTokenCounter, TokenCounter

__all__ = ["RunConfig", "resolve_client"]


def resolve_client(model: ModelClient | str) -> ModelClient:
    """``model`` itself, or the client a ``"provider:model"`` string names.

    The string builds what ``build_client(Settings(provider, model))`` builds (key from the
    environment, retries on); a bad one is a ``ConfigurationError`` listing the providers.
    """
    if not isinstance(model, str):
        return model
    from agentloop.providers._model_string import client_from_string  # only for a string

    return client_from_string(model)


def _fail(name: str, rule: str, value: Any) -> ConfigurationError:
    return ConfigurationError(f"RunConfig.{name} must be {rule}, got {value!r}", field=name)


@hint_init(
    {
        "model": "RunConfig does not pick the model: Agent('openai:gpt-5-mini') does "
        "(agent.override(model=...) in tests)",
        "input_guardrails": "guardrails belong to the agent: Agent(guardrails=[...])",
        "output_guardrails": "guardrails belong to the agent: Agent(guardrails=[...])",
        "tracing_disabled": "nothing is traced unless you add an observer (Agent(observers=[...]))",
        "retries": "recovery=ExponentialBackoffRecovery(...) retries failed tool calls; "
        "output_retries= retries invalid output; RetryingClient retries the model",
        "usage_limits": "budget=Budget(...) (or run(..., usage_limits=Budget(...)) for one run)",
    }
)
@record
class RunConfig:
    """How a run behaves; every field has a default (see SPEC section 2)."""

    max_turns: int = 200
    stream: bool = False
    parallel_tool_calls: bool = False
    max_concurrency: int = 8
    tool_timeout: float | None = 120.0
    suggest_tools: bool = True
    max_tool_calls: int | None = None
    max_tool_calls_per_turn: int | None = None
    max_tool_output_chars: int = 0
    headless: bool = True
    loop_detection: LoopDetection = field(default_factory=LoopDetection)
    convergence: Convergence = field(default_factory=Convergence)
    tool_breaker: ToolBreaker = field(default_factory=ToolBreaker)
    reflector: Reflector = field(default_factory=NoopReflector)
    recovery: RecoveryStrategy = field(
        default_factory=lambda: ExponentialBackoffRecovery(max_retries=3)
    )
    budget: Budget = field(default_factory=Budget)
    context_window: int = 200_000
    compact_threshold: float = 0.8
    auto_compact: bool = True
    compactor: Compactor = field(default_factory=TruncatingCompactor)
    token_counter: TokenCounter = field(default_factory=HeuristicTokenCounter)
    model_settings: ModelSettings = field(default_factory=ModelSettings)
    output_mode: Literal["tool", "native", "text"] = "tool"
    output_retries: int = 3
    tool_search: Literal["auto", "local", "native", "off"] = "auto"
    """Deferred tools (SPEC 22): found by the provider's search or ``search_tools``, or all sent."""
    compaction: Literal["auto", "local"] = "auto"
    """On an append-only conversation (SPEC 28): ``"auto"`` compacts on the provider's side where
    the model's profile has it (Anthropic ``compact_20260112``), else with ``compactor``;
    ``"local"`` always with ``compactor``. Any other conversation always uses ``compactor``."""
    max_handoffs: int = 10
    """Handoffs one run may make (SPEC 26); one more ends it with ``HandoffLimitExceeded``."""
    batch: bool = False
    """Each model turn through the provider's batch API (SPEC 25; ``agentloop.batch``)."""

    def __post_init__(self) -> None:
        self._check_counts()
        self._check_flags()
        self._check_components()
        self._check_output()

    def _check_output(self) -> None:
        retries = self.output_retries
        if not isinstance(retries, int) or isinstance(retries, bool) or retries < 0:
            raise _fail("output_retries", "an integer >= 0", retries)
        if self.output_mode not in ("tool", "native", "text"):
            raise _fail("output_mode", "'tool', 'native' or 'text'", self.output_mode)
        if self.tool_search not in ("auto", "local", "native", "off"):
            raise _fail("tool_search", "'auto', 'local', 'native' or 'off'", self.tool_search)
        if self.compaction not in ("auto", "local"):
            raise _fail("compaction", "'auto' or 'local'", self.compaction)

    def _check_counts(self) -> None:
        for name in ("max_turns", "max_concurrency"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise _fail(name, "an integer >= 1", value)
        for name in ("max_tool_calls", "max_tool_calls_per_turn"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise _fail(name, "None or an integer >= 1", value)
        for name in ("max_tool_output_chars", "context_window", "max_handoffs"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise _fail(name, "an integer >= 0", value)
        timeout = self.tool_timeout
        if timeout is not None and (not is_finite(timeout) or timeout < 0):
            raise _fail("tool_timeout", "None or a number >= 0", timeout)
        threshold = self.compact_threshold
        if not is_finite(threshold) or not 0.0 < threshold <= 1.0:
            raise _fail("compact_threshold", "in (0, 1]", threshold)

    def _check_flags(self) -> None:
        flags = ("stream", "parallel_tool_calls", "suggest_tools", "headless", "auto_compact")
        for name in (*flags, "batch"):
            if not isinstance(getattr(self, name), bool):
                raise _fail(name, "a bool", getattr(self, name))

    def _check_components(self) -> None:
        typed: tuple[tuple[str, type], ...] = (
            ("loop_detection", LoopDetection),
            ("convergence", Convergence),
            ("tool_breaker", ToolBreaker),
            ("budget", Budget),
            ("model_settings", ModelSettings),
        )
        for name, cls in typed:
            if not isinstance(getattr(self, name), cls):
                raise _fail(name, f"a {cls.__name__}", getattr(self, name))
        protocols = (
            ("reflector", "analyze"),
            ("recovery", "decide"),
            ("compactor", "compact"),
            ("token_counter", "count_message"),
        )
        for name, method in protocols:
            if not callable(getattr(getattr(self, name), method, None)):
                raise _fail(name, f"an object with a {method}() method", getattr(self, name))
