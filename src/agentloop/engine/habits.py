"""What people expect to find on an agent, from the libraries they come from (SPEC 21).

``@agent.tool`` registers a function as a tool of the agent; ``agent.override(...)`` swaps the
client or the tools for a test (``agentloop.engine.overrides``); a peer's method looked up on an
agent (``agent.run_stream``, ``@agent.system_prompt``) is an ``AttributeError`` naming ours
(``agentloop.engine.peers``). ``Agent`` takes them in as a mixin; they read only the agent's
registry and output type.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, overload

from agentloop._util.peers import hinting
from agentloop.engine import peers
from agentloop.engine.output import OutputType
from agentloop.engine.overrides import override
from agentloop.engine.setup import add_tool
from agentloop.model import ModelClient
from agentloop.tools import _TOOL_ADVICE, FunctionTool, Tool, ToolRegistry, tool

if TYPE_CHECKING:
    from agentloop.engine.toolsets import Toolsets
    from agentloop.toolsets import AbstractToolset, DynamicToolset

__all__ = ["Habits"]


class Habits:
    """``Agent``'s ``tool``, ``override`` and peer-name hints."""

    registry: ToolRegistry
    output: OutputType[Any] | None
    _toolsets: Toolsets

    @overload
    def tool(self, func: Callable[..., Any], /) -> FunctionTool: ...

    @overload
    def tool(
        self,
        /,
        *,
        name: str | None = None,
        description: str | None = None,
        timeout: float | None = None,
        requires_approval: bool = False,
        external: bool = False,
        defer_loading: bool = False,
    ) -> Callable[[Callable[..., Any]], FunctionTool]: ...

    @hinting(_TOOL_ADVICE)
    def tool(
        self,
        func: Callable[..., Any] | None = None,
        /,
        *,
        name: str | None = None,
        description: str | None = None,
        timeout: float | None = None,
        requires_approval: bool = False,
        external: bool = False,
        defer_loading: bool = False,
    ) -> FunctionTool | Callable[[Callable[..., Any]], FunctionTool]:
        """Register a function as a tool of this agent: ``@agent.tool`` or ``@agent.tool(...)``.

        Takes every option ``@tool`` takes and returns what ``@tool`` returns. The tool joins
        the agent's registry, shared by all its sessions, and is offered from the next run on.
        """
        typed = self.output is not None

        def register(f: Callable[..., Any]) -> FunctionTool:
            made = tool(
                name=name,
                description=description,
                timeout=timeout,
                requires_approval=requires_approval,
                external=external,
                defer_loading=defer_loading,
            )(f)
            add_tool(self.registry, made, typed=typed)
            return made

        return register(func) if func is not None else register

    @overload
    def toolset(self, func: Callable[..., Any], /) -> DynamicToolset: ...

    @overload
    def toolset(self, /, *, per_step: bool = False) -> Callable[..., DynamicToolset]: ...

    def toolset(
        self, func: Callable[..., Any] | None = None, /, *, per_step: bool = False
    ) -> DynamicToolset | Callable[..., DynamicToolset]:
        """``@agent.toolset``: ``fn(ctx)`` returns tools or a toolset, per run (SPEC 22).

        ``per_step=True`` builds them before every model call instead.
        """
        from agentloop.toolsets import DynamicToolset

        def register(f: Callable[..., Any]) -> DynamicToolset:
            made = DynamicToolset(f, per_step=per_step)
            self._toolsets.sets = (*self._toolsets.sets, made)
            return made

        return register(func) if func is not None else register

    def override(
        self,
        *,
        model: ModelClient | str | None = None,
        tools: Iterable[Tool | Callable[..., Any]] | ToolRegistry | None = None,
        toolsets: Iterable[AbstractToolset] | None = None,
    ) -> AbstractContextManager[None]:
        """For tests: runs started inside the block use ``model`` and/or ``tools`` instead.

        ``with agent.override(model=ScriptedModel([...])): ...``. The swap holds in the current
        task and the tasks it creates inside the block (a context variable): other tasks
        running this agent meanwhile are unaffected. Leaving the block restores the agent, on
        error too. ``model`` may be a ``"provider:model"`` string; ``tools`` replaces every tool
        the agent offers, ``toolsets`` its toolsets.
        """
        return override(self, model=model, tools=tools, toolsets=toolsets)

    def to_a2a(self, *, name: str, **options: Any) -> Any:
        """This agent served over A2A: ``agentloop.a2a.A2AApp(agent, name=..., ...)`` (SPEC 26).

        An ASGI app, as pydantic-ai's and ADK's ``to_a2a``; extra ``a2a``. ``options`` are
        ``A2AApp``'s: ``description``, ``url``, ``session``, ``deps``, ``max_body_bytes``.
        """
        from agentloop.a2a import A2AApp

        return A2AApp(self, name=name, **options)  # type: ignore[arg-type]

    def __getattr__(self, name: str) -> Any:
        """A peer library's method named here says what to use instead (SPEC 21)."""
        raise peers.missing_attribute(self, name, [n for n in dir(type(self)) if n[0] != "_"])
