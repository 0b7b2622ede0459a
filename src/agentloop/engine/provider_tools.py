"""Provider-native tools in a run (SPEC 24): declared on the agent, reported, and continued turns.

- ``Agent(provider_tools=[...])``, or the same values inside ``tools=``: ``agent_provider_tools``
  takes them apart from the function tools and checks them (one per kind, no function tool of a
  declared kind's wire name, ``final_result`` included, and a client that can take every one:
  ``provider_tools.check_client``), all before the agent exists.
- The offer carries them on every request (``Offer.provider_tools``); an agent without any
  builds exactly the request it built before.
- ``emit_provider_events``: each ``ProviderToolCalled``/``ProviderToolReturned`` once, in the
  reply's order, before its ``ModelResponded``; only for an agent that declared some.
- ``continued``: ``stop_reason="pause_turn"`` (a long server-tool turn the provider paused) is no
  answer: the content goes back unchanged as the last assistant message and the engine asks again
  (a continued turn, never a pause: ``run.paused`` stays False). ``answer_text``: the reply
  that answers continues the same assistant turn, so the run's output is the text of the turns
  it continues and its own, as a UI streamed them (an A2A artifact, an MCP result, an eval read
  ``run.output``: they do not lose what came before the pause).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from agentloop._util.lazy import lazy_module
from agentloop.messages import Message, ProviderToolCallPart, ProviderToolResultPart
from agentloop.model import ModelResponse

if TYPE_CHECKING:
    from agentloop import events as ev
    from agentloop.engine.definition import Definition
    from agentloop.provider_tools import ProviderTool
else:  # the event classes load when somebody first listens
    ev = lazy_module("agentloop.events")

__all__ = [
    "PAUSE_TURN",
    "agent_provider_tools",
    "answer_text",
    "continued",
    "emit_provider_events",
    "split_tools",
]

PAUSE_TURN = "pause_turn"
"""The ``stop_reason`` of a turn the provider paused and wants continued (Anthropic)."""


def _is_provider_tool(value: object) -> bool:
    """Without importing the declarations: an agent that has none never loads them."""
    return any(c.__name__ == "ProviderTool" for c in type(value).__mro__[1:])


def split_tools(tools: Any) -> tuple[Any, list[object]]:
    """``tools=`` without its provider tools, and those (a registry or a string stays as is)."""
    if isinstance(tools, str | bytes) or not isinstance(tools, list | tuple):
        return tools, []
    found = [t for t in tools if _is_provider_tool(t)]
    if not found:
        return tools, []
    return [t for t in tools if not _is_provider_tool(t)], found


def agent_provider_tools(
    declared: Iterable[object], inside: list[object], agent: Definition[Any]
) -> tuple[ProviderTool, ...]:
    """The agent's provider tools, checked (``ConfigurationError`` before the agent exists).

    ``final_result`` (a typed answer in tool mode) counts as a function tool beside them.
    """
    if not inside and isinstance(declared, tuple | list) and not declared:
        return ()
    from agentloop.provider_tools import check_client, checked_provider_tools

    names = [spec.name for spec in agent.registry.specs()]
    if agent.output is not None and agent.config.output_mode == "tool":
        names.append(agent.output.tool_spec.name)
    tools = checked_provider_tools([*inside, *declared], names)
    if tools:
        check_client(agent.client, tools, functions=bool(names))
    return tools


def emit_provider_events(emit: Callable[[ev.Event], None], run_id: str, turn: int,
                         message: Message) -> None:  # fmt: skip
    """``ProviderToolCalled``/``ProviderToolReturned`` for each provider part, in order."""
    for part in message.parts:
        if isinstance(part, ProviderToolCallPart):
            emit(ev.ProviderToolCalled(run_id, turn, part))
        elif isinstance(part, ProviderToolResultPart):
            emit(ev.ProviderToolReturned(run_id, turn, part))


def continued(response: ModelResponse) -> bool:
    """A reply the provider paused mid-turn: ask again with it as the last assistant message."""
    return response.stop_reason == PAUSE_TURN and not response.tool_calls


def answer_text(turns: list[Any], text: str) -> str:
    """``text`` (the answer's) after that of the provider-paused turns just before it."""
    parts, index = [text], len(turns) - 2
    while index >= 0 and turns[index].stop_reason == PAUSE_TURN:
        parts.append(turns[index].text or "")
        index -= 1
    return "".join(reversed(parts))
