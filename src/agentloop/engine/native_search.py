"""Native tool search in a run (SPEC 22): the provider searches, the engine records what loaded.

Where the model's profile has it (``RunConfig.tool_search="auto"`` or ``"native"``), every
deferred tool is offered from the first request on, marked ``defer_loading``: the adapter sends
it so (with the provider's search tool) and the provider keeps it out of the model's context
until its own search finds it. Finding one changes nothing already sent, so an append-only
conversation (SPEC 28) sees no tool change. The reply's search blocks are SPEC 24's provider
parts; ``found`` reads the names they reference, which the plan records as loaded (``via``
``"native"``) like a local search's. ``"native"`` where a model has none is a
``ConfigurationError`` before anything is sent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from agentloop._provider_parts import tools_referenced
from agentloop.errors import ConfigurationError
from agentloop.messages import Message, ProviderToolResultPart
from agentloop.model import ToolSpec
from agentloop.tools import Tool, ToolContext

__all__ = ["Deferred", "found", "lacking", "native_mode"]


def lacking(client: object) -> object | None:
    """The first client of ``client`` whose model has no native tool search (None: none).

    A client says so with ``native_tool_search``; a ``FallbackClient`` answers for all its
    models; a wrapper without the attribute answers for the client it wraps (``inner``). A
    client that says nothing has none (local search: fails closed).
    """
    current = client
    for _ in range(8):
        models = getattr(current, "clients", None)
        if isinstance(models, tuple) and models:
            return next((found for c in models if (found := lacking(c)) is not None), None)
        said = getattr(current, "native_tool_search", None)
        if isinstance(said, bool):
            return None if said else current
        inner = getattr(current, "inner", None)
        if inner is None:
            return current
        current = inner
    return current


def native_mode(mode: str, client: object) -> bool:
    """Whether this run searches natively: ``auto`` where the model has it, ``native`` always.

    Raises:
        ConfigurationError: ``"native"`` and the model (or a fallback model) has none.
    """
    if mode not in ("auto", "native"):
        return False
    without = lacking(client)
    if without is None:
        return True
    if mode == "native":
        model = getattr(without, "model", "?")
        raise ConfigurationError(
            f"RunConfig.tool_search='native': model {model!r} has no native tool search "
            "(Anthropic Claude 4.x and later); use 'auto' or 'local'",
            field="tool_search",
        )
    return False


class Deferred(Tool):
    """A deferred tool offered for the provider's search: its spec says ``defer_loading``.

    An approval check stays the inner tool's (``gates`` reads ``inner``'s).
    """

    def __init__(self, inner: Tool) -> None:
        self.inner = inner
        self.name, self.description = inner.name, inner.description
        self.parameters, self.timeout = inner.parameters, inner.timeout
        self.external, self.requires_approval = inner.external, inner.requires_approval
        self.defer_loading = True
        journaled = getattr(inner, "journaled", None)
        if journaled is not None:  # a durable wrapper's choice holds through this one
            self.journaled = journaled
        self._spec: ToolSpec = replace(inner.spec(), defer_loading=True)

    def spec(self) -> ToolSpec:
        """The inner tool's, marked deferred (built once: the offer stays identical)."""
        return self._spec

    def validate(self, arguments: Mapping[str, Any]) -> Mapping[str, Any]:
        """The inner tool's."""
        return self.inner.validate(arguments)

    async def call(self, arguments: Mapping[str, Any], ctx: ToolContext) -> Any:
        """The inner tool's."""
        return await self.inner.call(arguments, ctx)


def found(messages: Sequence[Message], start: int) -> list[str]:
    """The tool names the native searches of ``messages[start:]`` referenced, in order."""
    names: list[str] = []
    for message in messages[start:]:
        if message.role != "assistant":
            continue
        for part in message.parts:
            if isinstance(part, ProviderToolResultPart):
                names.extend(tools_referenced(part))
    return names
