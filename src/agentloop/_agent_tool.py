"""``agent.as_tool()``: another agent as one tool of a parent run (SPEC 13).

Each call is a fresh conversation of the child (a fork of its configuration with no history),
so parallel calls are independent. The child's output is the tool's result (typed output as
JSON); its hard error is the parent's soft error ``agent '<name>' stopped: <Class>: <message>``.
A parent cancel reaches the child through task cancellation and ends the parent as
``Cancelled``. The child's usage is added to the parent run's usage and budget, and its events
reach the parent's observers and stream with ``path`` naming the agents from the root.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from agentloop.errors import AgentLoopError, ConfigurationError, ToolError
from agentloop.events import Event
from agentloop.tools import Tool, ToolContext

if TYPE_CHECKING:
    from agentloop.engine import Agent

__all__ = ["AgentTool"]


class AgentTool(Tool):
    """A ``Tool`` whose one parameter, ``input``, is the child agent's prompt."""

    def __init__(self, agent: Agent[Any], *, name: str, description: str) -> None:
        if not isinstance(name, str) or not name.strip():
            raise ConfigurationError("as_tool() needs a non-empty name", field="name")
        if not isinstance(description, str) or not description.strip():
            raise ConfigurationError(
                f"as_tool(name={name!r}) needs a description the parent model can read",
                field="description",
            )
        self.agent = agent
        self.name = name
        self.description = description
        self.parameters = {
            "type": "object",
            "properties": {"input": {"type": "string", "description": f"The request for {name}."}},
            "required": ["input"],
        }
        self.timeout = None

    def validate(self, arguments: Mapping[str, Any]) -> Mapping[str, Any]:
        """``input`` must be a string."""
        value = arguments.get("input")
        if not isinstance(value, str):
            problem = "Field required" if "input" not in arguments else "Input should be a string"
            raise ToolError(f"Invalid arguments for tool '{self.name}': input: {problem}")
        return {"input": value}

    async def call(self, arguments: Mapping[str, Any], ctx: ToolContext) -> Any:
        """Run a fresh conversation of the child; its hard error becomes soft text."""
        child = self.agent.fork()
        link = ctx._link
        forward = None
        if link is not None:
            bus = link[1].observers
            if bus.active:
                prefix = (self.name,)

                def forward(event: Event) -> None:
                    bus.emit(dataclasses.replace(event, path=prefix + event.path))

        state = child._begin(arguments["input"], ctx.deps, (ctx.cancel,), forward)
        try:
            run = await child._drive(state)
        except AgentLoopError as error:
            raise ToolError(
                f"agent '{self.name}' stopped: {type(error).__name__}: {error}"
            ) from None
        finally:
            if link is not None:
                _roll_up(link, child)
        return run.output


def _roll_up(link: tuple[Any, Any], child: Agent[Any]) -> None:
    """Add the child's usage to the parent run and its budget."""
    state, dispatcher = link
    run = child.current_run
    if run is None:
        return
    state.run.usage = state.run.usage + run.usage
    model = run.turns[-1].model if run.turns else child.client.model
    dispatcher.safety.budget_usage(run.usage, model)
