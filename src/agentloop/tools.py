"""Tools: ``@tool`` for functions, ``Tool`` for hand-written ones, and the ``ToolRegistry``.

A tool fails softly by raising ``ToolError("text for the model")`` or returning
``ToolOutput(content, is_error=True)``. Sync functions run in a worker thread so they never
block the event loop. Results that are not strings are serialised (JSON for dicts, lists,
pydantic models and dataclasses), never ``repr``-dumped.
"""

from __future__ import annotations

import inspect
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, get_origin, get_type_hints, overload, runtime_checkable

import pydantic_core
from pydantic import BaseModel, ValidationError

from agentloop._plain_args import plain_fields
from agentloop._schema import ArgumentModel, build_argument_model, format_validation_error
from agentloop._tool_output import render_content
from agentloop._tool_output import split_output as split_output  # (re-exported)
from agentloop._util.numbers import is_finite
from agentloop._util.peers import hinting
from agentloop._util.slots import record
from agentloop._util.threads import in_daemon_thread
from agentloop.cancel import CancelToken
from agentloop.errors import (
    ConfigurationError,
    ToolError,
    ToolExecutionError,
    ToolNotFound,
)
from agentloop.media import MediaPart
from agentloop.model import ToolSpec
from agentloop.run import DepsT, RunContext

__all__ = [
    "FunctionTool",
    "RunContext",
    "Tool",
    "ToolContext",
    "ToolOutput",
    "ToolRegistry",
    "Toolset",
    "render_content",
    "tool",
]


@record
class ToolOutput:
    """A tool's result with an explicit error flag (``is_error=True`` is a soft error)."""

    content: Any
    is_error: bool = False


class ToolContext(RunContext[DepsT]):
    """What a tool may know: run id, turn, call id, cancel token, scratch dir and ``deps``.

    ``deps`` is what the application passed to ``run(..., deps=...)`` (None if nothing).

    Annotate the parameter as ``ctx: ToolContext[MyDeps]`` to have ``ctx.deps`` typed.
    """

    __slots__ = ("_cancel", "_link", "_scratch", "call_id", "media", "tool_name")

    def __init__(
        self,
        *,
        run_id: str,
        turn: int,
        call_id: str,
        tool_name: str,
        cancel: CancelToken,
        session_id: str,
        scratch: Callable[[], Path] | None = None,
        deps: DepsT = None,  # type: ignore[assignment]
        agent: str | None = None,
    ) -> None:
        self.deps: DepsT = deps
        self.agent = agent  # the active agent's handoff name (SPEC 26)
        self.run_id = run_id
        self.turn = turn
        self.call_id = call_id
        self.tool_name = tool_name
        self.media: tuple[MediaPart, ...] = ()
        """Media the tool returned (set by the engine from its return value; read by the result)."""
        self._cancel: CancelToken | None = cancel
        self.session_id = session_id
        self._scratch = scratch
        self._link: Any = None  # the engine's (run state, dispatcher), for agents as tools

    @property
    def cancel(self) -> CancelToken:
        """The run's cancel signal: it fires when the run is cancelled, whoever cancels it.

        In a run, made at its first read (``Conversation._tool_cancel``): a run whose tools
        never read it holds no token (the session's own is made when somebody asks for it).
        """
        token = self._cancel
        if token is None:
            link = self._link
            token = CancelToken() if link is None else link[0].session._tool_cancel(link[0])
            self._cancel = token
        return token

    @cancel.setter
    def cancel(self, token: CancelToken) -> None:
        self._cancel = token

    @property
    def scratch_dir(self) -> Path:
        """A per-session scratch directory, created on first use."""
        if self._scratch is not None:
            return self._scratch()
        path = Path(tempfile.gettempdir()) / f"agentloop-{self.session_id}"
        path.mkdir(parents=True, exist_ok=True)
        return path

    def __repr__(self) -> str:
        return f"ToolContext(run_id={self.run_id!r}, turn={self.turn}, call_id={self.call_id!r})"


class Tool:
    """Base class for hand-written tools.

    Set ``name``, ``description`` and ``parameters`` (a JSON schema object) and implement
    ``call``. ``validate`` checks required keys; override it for stricter checks (return the
    arguments to use, or raise ``ToolError`` with the text the model should read).
    """

    name: str = ""
    description: str = ""
    parameters: Mapping[str, Any] = {"type": "object", "properties": {}}
    timeout: float | None = None
    requires_approval: bool = False
    """Each call waits for a decision: the agent's ``approver``, or a pause (SPEC 17)."""
    external: bool = False
    """Never run by the agent: each call is pending until the application answers it."""
    defer_loading: bool = False
    """Not sent to the model until tool search finds it (SPEC 22)."""

    def validate(self, arguments: Mapping[str, Any]) -> Mapping[str, Any]:
        """Check arguments before the call; raise ``ToolError`` with the problem."""
        missing = [k for k in self.parameters.get("required", ()) if k not in arguments]
        if missing:
            problems = "; ".join(f"{k}: Field required" for k in missing)
            raise ToolError(f"Invalid arguments for tool '{self.name}': {problems}")
        return arguments

    async def call(self, arguments: Mapping[str, Any], ctx: ToolContext) -> Any:
        """Run the tool; the return value is rendered with ``render_content``."""
        raise NotImplementedError

    def spec(self) -> ToolSpec:
        """The tool as advertised to the model."""
        return ToolSpec(self.name, self.description, self.parameters)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


class FunctionTool(Tool):
    """A tool made from a function by ``@tool``."""

    def __init__(
        self,
        func: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        timeout: float | None = None,
        requires_approval: bool = False,
        external: bool = False,
        defer_loading: bool = False,
    ) -> None:
        if inspect.iscoroutine(func):
            called = func.__qualname__
            func.close()  # it never runs: no "never awaited" warning on top of this error
            raise ConfigurationError(
                f"a tool is a function, not the coroutine object {called}() returns: "
                f"pass {called} itself, without calling it",
                field="tools",
            )
        self.func = func
        self.name = name or func.__name__
        if timeout is not None and (not is_finite(timeout) or timeout < 0):
            raise ConfigurationError(f"tool '{self.name}': timeout must be >= 0", field="timeout")
        self.timeout = timeout
        self.requires_approval = bool(requires_approval)
        self.external = bool(external)
        self.defer_loading = bool(defer_loading)
        self.takes_context = _first_param_is_context(func)
        model, schema, doc = build_argument_model(
            func, self.name, self.takes_context, is_context=_is_context
        )
        self.model: type[ArgumentModel] = model
        self.parameters = schema
        self.description = description if description is not None else doc
        if not self.description.strip():
            raise ConfigurationError(
                f"tool '{self.name}' has no description, so the model cannot know what it does: "
                f"give the function a docstring or use @tool(description=...)",
                field="description",
            )
        self.is_async = inspect.iscoroutinefunction(func)
        validator = model.__pydantic_validator__  # built once: the model is complete here
        self._validate: Callable[[Any], BaseModel] = (
            validator.validate_python
            if isinstance(validator, pydantic_core.SchemaValidator)
            else model.model_validate
        )
        self._plain = plain_fields(model)  # all plain ``str``: ``engine.invoke`` skips pydantic
        self._spec = ToolSpec(self.name, self.description, schema)
        self.__doc__ = func.__doc__

    def spec(self) -> ToolSpec:
        """The tool as advertised to the model (built once)."""
        return self._spec

    def validate(self, arguments: Mapping[str, Any]) -> Mapping[str, Any]:
        """Validate with the pydantic model; the text names each field and problem.

        The arguments are the model's fields by name (its ``__dict__``: ``extra="forbid"``
        keeps anything else out), in the order the function declares them.
        """
        try:
            parsed = self._validate(arguments)
        except ValidationError as exc:
            raise ToolError(format_validation_error(self.name, exc)) from None
        return dict(parsed.__dict__)

    async def call(self, arguments: Mapping[str, Any], ctx: ToolContext) -> Any:
        """Await async functions; run sync ones in a worker thread."""
        args = (ctx,) if self.takes_context else ()
        if self.is_async:
            return await self.func(*args, **arguments)
        return await in_daemon_thread(self.func, *args, **arguments)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the underlying function directly."""
        return self.func(*args, **kwargs)


_CONTEXTS = (ToolContext, RunContext)
_CONTEXT_NAMES = frozenset(c.__name__ for c in _CONTEXTS)


def _is_context(hint: Any) -> bool:
    """True for a ``ToolContext`` (or ``RunContext``) annotation, bare or ``ToolContext[Deps]``."""
    return hint in _CONTEXTS or get_origin(hint) in _CONTEXTS


def _first_param_is_context(func: Callable[..., Any]) -> bool:
    params = list(inspect.signature(func).parameters.values())
    if not params:
        return False
    try:
        hint = get_type_hints(func).get(params[0].name)
    except Exception:
        hint = None
    if _is_context(hint):
        return True
    annotation = params[0].annotation
    return annotation in _CONTEXTS or (
        isinstance(annotation, str) and annotation.split("[", 1)[0].strip() in _CONTEXT_NAMES
    )


_TOOL_ADVICE = {
    "name_override": "name=",
    "description_override": "description=",
    "retries": "RunConfig(recovery=...) decides retries of failed tool calls",
    "takes_ctx": "declare a first parameter ctx: ToolContext (or RunContext) to get one",
    "failure_error_function": "raise ToolError('text for the model') inside the tool",
}
"""Keywords of other libraries' tool decorators, and ours (``agentloop._util.peers``)."""


@overload
def tool(func: Callable[..., Any], /) -> FunctionTool: ...


@overload
def tool(
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
    """Make a tool from a sync or async function (``@tool`` or ``@tool(name=..., timeout=...)``).

    The name is the function's, the description its docstring, the JSON schema and argument
    validation come from the type hints via pydantic. ``requires_approval=True``: each call
    goes to the agent's approver, or pauses the run when it has none; ``external=True``: the
    agent never runs it, each call pauses the run until the application answers it (SPEC 17);
    ``defer_loading=True``: not sent until tool search finds it (SPEC 22).
    """

    def wrap(f: Callable[..., Any]) -> FunctionTool:
        return FunctionTool(
            f,
            name=name,
            description=description,
            timeout=timeout,
            requires_approval=requires_approval,
            external=external,
            defer_loading=defer_loading,
        )

    return wrap(func) if func is not None else wrap


@runtime_checkable
class Toolset(Protocol):
    """A source of tools listed at run time, such as an MCP server (``agentloop.mcp``).

    Put it in ``Agent(tools=[...])`` beside plain tools. ``list_tools`` is awaited when a run
    starts (starting the source if needed) and again before a model call whenever ``version``
    changed; ``aclose`` is awaited by ``agent.aclose()``.
    """

    @property
    def name(self) -> str:
        """The source's name, used in error messages."""
        ...

    @property
    def version(self) -> int:
        """Bumped whenever the source's tools changed."""
        ...

    async def list_tools(self) -> Sequence[Tool]:
        """The source's tools now."""
        ...

    async def aclose(self) -> None:
        """Stop the source and release what it holds."""
        ...


_BUILT_ONCE = FunctionTool.spec  # a spec built once: ``ToolRegistry.specs`` keeps those

_DICT_TOOL = (
    "a dict is not a tool ({item!r:.80}): write the function and decorate it with @tool (its "
    "signature becomes the schema), or subclass Tool with name, description, parameters (the "
    "JSON schema) and an async call()"
)


class ToolRegistry:
    """Tools by name; two tools with one name are a ``ConfigurationError``."""

    def __init__(self, tools: Iterable[Tool | Callable[..., Any]] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self._specs: tuple[ToolSpec, ...] | None = None  # see ``specs``
        self.deferring = False
        """Whether a tool is ``defer_loading`` (the run then computes its offer per call)."""
        for item in tools:
            self.register(item)

    def register(self, item: Tool | Callable[..., Any]) -> Tool:
        """Add a tool (a plain function is wrapped with ``@tool``)."""
        if not isinstance(item, Tool):
            if isinstance(item, Mapping):  # a schema in another library's shape
                raise ConfigurationError(_DICT_TOOL.format(item=item), field="tools")
            if not callable(item) and not inspect.iscoroutine(item):  # a coroutine: named below
                raise ConfigurationError(f"not a tool: {item!r}", field="tools")
            item = tool(item)
        if not item.name:
            raise ConfigurationError(f"tool {item!r} has no name", field="tools")
        if item.name in self._tools:
            raise ConfigurationError(
                f"two tools are named '{item.name}'; tool names must be unique", field="tools"
            )
        self._tools[item.name] = item
        self._specs = None
        if item.defer_loading:
            self.deferring = True
        return item

    def unregister(self, name: str) -> None:
        """Remove a tool (a run that advertised it answers later calls with a registry miss)."""
        self._tools.pop(name, None)
        self._specs = None

    def get(self, name: str) -> Tool | None:
        """The tool called ``name``, or None."""
        return self._tools.get(name)

    def names(self) -> list[str]:
        """Registered names, sorted."""
        return sorted(self._tools)

    def specs(self) -> tuple[ToolSpec, ...]:
        """Every tool as advertised to the model, in registration order.

        Kept until the tools change if each is a ``FunctionTool`` (its spec is built once).
        """
        specs = self._specs
        if specs is None:
            tools = self._tools.values()
            specs = tuple([t.spec() for t in tools])
            if all(type(t).spec is _BUILT_ONCE for t in tools):
                self._specs = specs
        return specs

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    async def execute(
        self, name: str, arguments: Mapping[str, Any], ctx: ToolContext | None = None
    ) -> str:
        """Run a tool directly (outside a run): misses and failures are hard errors here."""
        found = self._tools.get(name)
        if found is None:
            raise ToolNotFound(name, self.names())
        context = ctx or ToolContext(
            run_id="direct",
            turn=0,
            call_id="direct",
            tool_name=name,
            cancel=CancelToken(),
            session_id=f"direct-{os.getpid()}",
        )
        try:
            output = await found.call(found.validate(arguments), context)
        except ToolError as exc:
            raise ToolExecutionError(name, exc.message) from exc
        except Exception as exc:
            raise ToolExecutionError(name, f"{type(exc).__name__}: {exc}") from exc
        if isinstance(output, ToolOutput):
            if output.is_error:
                raise ToolExecutionError(name, render_content(output.content))
            return render_content(output.content)
        return render_content(output)
