"""``Memory``: long-term memory as an agent's capability (``Agent(memory=Memory(...))``).

What it checks at construction (``ConfigurationError``, SPEC 27): a store; a namespace that is
a callable of the run's context (a fixed tuple is refused: one agent serves many users, and the
callable's result is the only key a run uses); numbers in range; ``anthropic_tool`` one of
``"auto"``, ``True``, ``False``. What it gives an agent: the tools the model gets (``tools``):
``remember``/``recall``/``forget`` (``agentloop.memory._tools``), or on Claude one ``memory``
tool served over the same store (``agentloop.memory._anthropic``). The engine's step
(``agentloop.engine.remembering``) calls the namespace, recalls, and commits the staged writes.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Literal

from agentloop.errors import ConfigurationError
from agentloop.memory._item import MAX_K, Namespace, check_namespace
from agentloop.memory._store import BaseMemoryStore
from agentloop.run import RunContext

if TYPE_CHECKING:
    from agentloop.memory._run import MemoryRun
    from agentloop.model import ModelClient
    from agentloop.tools import Tool

__all__ = ["TOOL_NAMES", "Memory", "by_session", "call_namespace"]

TOOL_NAMES = ("remember", "recall", "forget", "memory")
"""Names the capability takes: an agent tool of one of them is a ``ConfigurationError``."""

NamespaceFn = Callable[[RunContext[Any]], Namespace | Awaitable[Namespace]]


def by_session(ctx: RunContext[Any]) -> Namespace:
    """The namespace of memory within one conversation: ``("session", ctx.session_id)``."""
    return ("session", ctx.session_id)


def _count(name: str, value: object, low: int, high: int | None = None) -> int:
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or value < low
        or (high is not None and value > high)
    ):
        span = f"from {low} to {high}" if high is not None else f">= {low}"
        raise ConfigurationError(f"Memory {name} must be an int {span}, got {value!r}", field=name)
    return value


class Memory:
    """Long-term memory for an agent: a store, and the namespace each run uses.

    Args:
        store: A ``MemoryStore`` (``InMemoryMemoryStore``, ``SQLiteMemoryStore``,
            ``PostgresMemoryStore``).
        namespace: ``(ctx: RunContext) -> tuple[str, ...]`` (sync or async), called once at each
            run's start: typically the application's user, from ``ctx.deps``.
        auto_recall: Search the run's input and add up to this many hits to the system prompt
            (0: off).
        recall_tokens: The recall block's size limit, by the agent's ``TokenCounter``.
        max_item_chars: The longest text the model may save.
        max_items: The most items a namespace may hold through the model's writes.
        anthropic_tool: ``"auto"``: Anthropic's memory tool on Claude, the three tools elsewhere;
            ``True``: Claude only (another client is a ``ConfigurationError``); ``False``: never.
    """

    def __init__(
        self,
        store: BaseMemoryStore,
        *,
        namespace: NamespaceFn,
        auto_recall: int = 0,
        recall_tokens: int = 1_000,
        max_item_chars: int = 2_000,
        max_items: int = 1_000,
        anthropic_tool: bool | Literal["auto"] = "auto",
    ) -> None:
        if not isinstance(store, BaseMemoryStore):
            raise ConfigurationError(
                f"Memory needs a memory store (InMemoryMemoryStore, SQLiteMemoryStore, "
                f"PostgresMemoryStore), got {type(store).__name__}",
                field="store",
            )
        if not callable(namespace):
            raise ConfigurationError(
                f"Memory namespace must be a function of the run's context, e.g. "
                f"namespace=lambda ctx: ('user', ctx.deps.user_id), got {namespace!r}: one "
                "agent serves many users, so a fixed namespace is refused "
                "(agentloop.memory.by_session keeps memory within one conversation)",
                field="namespace",
            )
        if anthropic_tool not in ("auto", True, False):
            raise ConfigurationError(
                f"Memory anthropic_tool must be 'auto', True or False, got {anthropic_tool!r}",
                field="anthropic_tool",
            )
        self.store = store
        self.namespace = namespace
        self.auto_recall = _count("auto_recall", auto_recall, 0, MAX_K)
        self.recall_tokens = _count("recall_tokens", recall_tokens, 1)
        self.max_item_chars = _count("max_item_chars", max_item_chars, 1)
        self.max_items = _count("max_items", max_items, 1)
        self.anthropic_tool = anthropic_tool
        self.runs: dict[str, MemoryRun] = {}
        """The memory state of each run in flight, by run id (the tools look theirs up)."""

    def __repr__(self) -> str:
        return f"Memory({self.store!r}, auto_recall={self.auto_recall})"

    def native(self, client: ModelClient) -> bool:
        """Whether the model gets Anthropic's memory tool (every model of ``client`` is Claude)."""
        if self.anthropic_tool is False:
            return False
        claude = all(p == "anthropic" for p in _providers(client))
        if self.anthropic_tool is True and not claude:
            raise ConfigurationError(
                "Memory(anthropic_tool=True) needs an Anthropic client (every model of a "
                f"FallbackClient), got {client.provider!r}; use anthropic_tool='auto'",
                field="anthropic_tool",
            )
        return claude

    def tools(self, client: ModelClient) -> list[Tool]:
        """The tools the model gets over this memory (never a namespace parameter)."""
        if self.native(client):
            from agentloop.memory._anthropic import AnthropicMemoryTool

            return [AnthropicMemoryTool(self)]
        from agentloop.memory._tools import ForgetTool, RecallTool, RememberTool

        return [RememberTool(self), RecallTool(self), ForgetTool(self)]


def _providers(client: object) -> list[str]:
    """The providers of every model a client may call (each of a ``FallbackClient``'s)."""
    clients = getattr(client, "clients", None)
    if isinstance(clients, tuple | list):
        return [p for c in clients for p in _providers(c)]
    return [str(getattr(client, "provider", ""))]


async def call_namespace(memory: Memory, ctx: RunContext[Any]) -> Namespace:
    """The run's namespace; ``ConfigurationError`` (cause chained) when it raises or is bad."""
    fn = memory.namespace
    name = getattr(fn, "__qualname__", None) or repr(fn)
    try:
        value = fn(ctx)
        if inspect.isawaitable(value):
            value = await value
    except Exception as exc:
        from agentloop.safety.redact import redact_secrets  # the one redactor

        raise ConfigurationError(
            f"the memory namespace function {name} raised {type(exc).__name__}: "
            f"{redact_secrets(str(exc))}",
            field="namespace",
        ) from exc
    try:
        return check_namespace(value)
    except Exception as exc:
        raise ConfigurationError(
            f"the memory namespace function {name} returned {value!r}: {exc}", field="namespace"
        ) from exc
