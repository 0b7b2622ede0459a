"""What ``Agent(...)`` checks before it exists: each bad argument is a clear error naming the fix.

A client without ``complete``, a config that is not a ``RunConfig``, an approver that cannot be
called, tools that are not a list (or hold a coroutine
object, a function called by mistake), a tool named ``final_result`` beside typed output, an
``output_type`` that is a string or an instance instead of a type, a history that is not a valid
transcript, a store that is not a ``Store``, a named session that already has runs
(``Agent.resume`` continues those), or a session id the store could not keep (``session_id``).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeGuard, cast

from agentloop._util.toolname import check_tool_name
from agentloop.config import RunConfig
from agentloop.engine.no_history import NO_HISTORY
from agentloop.engine.output import FINAL_RESULT, OutputType
from agentloop.errors import ConfigurationError, InvalidInput, TranscriptError
from agentloop.hooks import Hook
from agentloop.messages import Message
from agentloop.observers import Observer
from agentloop.tools import Tool, ToolRegistry, Toolset
from agentloop.transcript import validate_transcript

if TYPE_CHECKING:
    from agentloop.engine.definition import Definition
    from agentloop.engine.guarding import Guardrails
    from agentloop.engine.session import Session
    from agentloop.fleet import RateGovernor
    from agentloop.guardrails import Guardrail
    from agentloop.model import ModelClient
    from agentloop.store import Store
    from agentloop.store._session import SessionRecorder

__all__ = [
    "add_tool",
    "checked_history",
    "checked_session_id",
    "checked_setup",
    "checked_store",
    "fork",
    "governed_client",
    "governed_config",
    "guardrails_of",
    "handoffs",
    "hooks",
    "observers",
    "output_type",
    "recorder",
    "registry",
    "restored",
]


@functools.cache
def _default_config() -> RunConfig:
    """``RunConfig()``, built once and shared: it is frozen and its default parts keep no state.

    Each build validates every nested config (~13 us per ``Agent``); one shared token counter
    also keeps the per-counter request-overhead cache warm across agents.
    """
    return RunConfig()


def checked_setup(client: object, config: object, approver: object) -> RunConfig:
    """The run config, once the client, config and approver are known to be usable."""
    if isinstance(client, str):
        pass  # a 'provider:model' string: built (and checked) by config.resolve_client
    elif client is None or not callable(getattr(client, "complete", None)):
        raise ConfigurationError(
            f"Agent needs a model, got {type(client).__name__}: a 'provider:model' string such "
            "as 'openai:gpt-5-mini', or a ModelClient (build_client(Settings(...)), a "
            "ScriptedModel in tests)",
            field="client",
        )
    config = _default_config() if config is None else config
    if not isinstance(config, RunConfig):
        raise ConfigurationError("Agent config must be a RunConfig", field="config")
    if approver is not None and not callable(approver):
        raise ConfigurationError(
            f"Agent approver must be callable (call, message) -> bool, got {approver!r}",
            field="approver",
        )
    if config.tool_search == "native" and not isinstance(client, str):
        from agentloop.engine.native_search import native_mode  # every fallback model (22)

        native_mode("native", client)
    return config


_HOOK_METHODS = ("pre_tool", "post_tool", "pre_compact", "on_run_start", "on_run_end")


def hooks(hooks: Iterable[object]) -> tuple[Hook, ...]:
    """``hooks`` as a tuple, each a ``Hook`` or an object with every hook method.

    Anything else (a plain function, say) would end each run as an ``InternalError`` at its
    first hook call: it is refused here, with the fix.
    """
    return _of_kind(
        hooks,
        lambda h: isinstance(h, Hook) or all(callable(getattr(h, m, None)) for m in _HOOK_METHODS),
        "hooks",
        "Hook objects: subclass agentloop.Hook and override the methods you need (pre_tool, "
        "post_tool, pre_compact, on_run_start, on_run_end)",
    )


def observers(observers: Iterable[object]) -> tuple[Observer, ...]:
    """``observers`` as a tuple, each an ``Observer`` or an object with an ``on_event`` method.

    Anything else (a plain function, say) would only fail at every event of every run, logged
    and ignored: it is refused here, with the fix.
    """
    return _of_kind(
        observers,
        lambda o: isinstance(o, Observer) or callable(getattr(o, "on_event", None)),
        "observers",
        "Observer objects: subclass agentloop.observers.Observer and override on_event(event) "
        "for every event (or the on_* methods you want); a function goes inside on_event",
    )


def _of_kind(
    items: Iterable[object], fits: Callable[[object], bool], field: str, take: str
) -> tuple[Any, ...]:
    """``items`` as a tuple once each ``fits``; else ``ConfigurationError`` saying what to pass."""
    kept = tuple(items)
    for item in kept:
        if not fits(item):
            what = getattr(item, "__qualname__", None) or type(item).__name__
            raise ConfigurationError(f"Agent {field} take {take}; got {what}", field=field)
    return kept


def governed_client(client: ModelClient, governor: object, config: RunConfig) -> ModelClient:
    """``client`` under ``governor`` (SPEC 25), or ``client`` itself when there is none.

    The governor goes below the retries and fallbacks (``agentloop.fleet.govern``): every HTTP
    request waits for it. Without one nothing changes and nothing of the fleet is imported.
    """
    if governor is None:
        return client
    if not callable(getattr(governor, "acquire", None)):
        raise ConfigurationError(
            f"Agent governor must be an agentloop.fleet.RateGovernor, got {governor!r}",
            field="governor",
        )
    from agentloop.fleet import govern

    return govern(client, cast("RateGovernor", governor), config.token_counter)


def governed_config(config: RunConfig, governor: object) -> RunConfig:
    """``config`` whose compactor and reflector requests also wait for ``governor`` (SPEC 25).

    ``agentloop.fleet.govern_helpers``; without a governor, ``config`` and nothing imported (a
    governor of the wrong type is ``governed_client``'s error).
    """
    if governor is None or not callable(getattr(governor, "acquire", None)):
        return config
    from agentloop.fleet._client import govern_helpers

    return govern_helpers(config, cast("RateGovernor", governor))


def guardrails_of(guardrails: Sequence[Guardrail] | None) -> Guardrails | None:
    """The checked guardrails, or None when there are none (their machinery never loads)."""
    if guardrails is None or (isinstance(guardrails, list | tuple) and not guardrails):
        return None
    from agentloop.engine.guarding import checked_guardrails

    return checked_guardrails(guardrails)


def output_type(output_type: type[Any] | None, registry: ToolRegistry) -> OutputType[Any] | None:
    """The output type, checked; None for plain text answers."""
    if output_type is None:
        return None
    _check_output_kind(output_type)
    if FINAL_RESULT in registry:
        raise ConfigurationError(
            f"a tool is named '{FINAL_RESULT}', the name typed output answers with; rename it",
            field="tools",
        )
    return OutputType(output_type)


_TYPE_KINDS = "int, list[str], a pydantic model, a dataclass or a TypedDict"


def _check_output_kind(value: object) -> None:
    """A string or an instance where a type belongs is named (not pydantic's own advice)."""
    if isinstance(value, str):
        raise ConfigurationError(
            f"output_type must be a type ({_TYPE_KINDS}), not the string {value!r}: "
            f"pass the class itself, output_type={value}",
            field="output_type",
        )
    if isinstance(value, type) or type(value).__module__ in _TYPING_MODULES:
        return
    raise ConfigurationError(
        f"output_type must be a type ({_TYPE_KINDS}), got an instance of "
        f"{type(value).__name__}: pass the class, output_type={type(value).__name__}",
        field="output_type",
    )


_TYPING_MODULES = frozenset({"typing", "types", "typing_extensions", "annotated_types"})
"""Where the forms that stand for types live (``list[str]``, ``int | None``, ``Literal``)."""


def registry(tools: object) -> tuple[ToolRegistry, list[Toolset]]:
    """The agent's registry and tool sources; a single tool or a string is a clear error."""
    if isinstance(tools, ToolRegistry):
        return _named(tools), []
    if isinstance(tools, str | bytes | Tool) or callable(tools) or _is_toolset(tools):
        raise ConfigurationError(
            f"Agent tools must be a list of tools, got {tools!r}; write tools=[...]",
            field="tools",
        )
    if not isinstance(tools, Iterable):
        raise ConfigurationError(
            f"Agent tools must be a list of tools, got {type(tools).__name__}", field="tools"
        )
    items = list(tools)
    for item in items:
        if inspect.iscoroutine(item):
            called = item.__qualname__
            item.close()  # it never runs: no "never awaited" warning on top of this error
            raise ConfigurationError(
                f"Agent tools=[...] holds the coroutine object {called}() returns, not a tool: "
                f"pass the function itself, tools=[{called}]",
                field="tools",
            )
    sources = [t for t in items if _is_toolset(t)]
    return _named(ToolRegistry(t for t in items if not _is_toolset(t))), sources


def _named(registry: ToolRegistry) -> ToolRegistry:
    """``registry`` once every tool's name is one a provider takes (SPEC 22), else the error."""
    for item in registry:
        check_tool_name(item.name)
    return registry


def add_tool(registry: ToolRegistry, item: Tool, *, typed: bool) -> Tool:
    """``@agent.tool``: ``item`` added to the agent's registry (its runs offer it from the next)."""
    if typed and item.name == FINAL_RESULT:
        raise ConfigurationError(
            f"a tool is named '{FINAL_RESULT}', the name typed output answers with; rename it",
            field="tools",
        )
    check_tool_name(item.name)
    return registry.register(item)


def _is_toolset(item: object) -> TypeGuard[Toolset]:
    """Whether ``item`` is a ``Toolset``, judged by its ``list_tools``.

    An ``isinstance`` on the runtime-checkable protocol costs ~14 us in Python 3.11, paid per
    tool per ``Agent``.
    """
    return not isinstance(item, Tool) and callable(getattr(item, "list_tools", None))


def checked_history(history: object) -> list[Message]:
    """``Agent(history=...)`` as a list, checked as a transcript (``TranscriptError`` names it)."""
    if history is None:
        return []
    if isinstance(history, str | bytes | Message) or not isinstance(history, Iterable):
        raise TranscriptError(
            f"Agent history must be a sequence of Message, got {type(history).__name__}"
        )
    messages = list(history)
    for index, message in enumerate(messages):
        if not isinstance(message, Message):
            raise TranscriptError(
                f"history[{index}] is a {type(message).__name__}, not a Message", index=index
            )
    if messages:
        validate_transcript(messages)
    return messages


def checked_session_id(session_id: object, *, new: Callable[[], str] | None = None) -> str:
    """``session_id`` when every face can keep it, else ``InvalidInput`` naming the fix.

    ``new`` makes the id when none was given (``session_id`` None).

    A session id goes into the store's key columns, events, spans, UI streams and the CLI. It
    is refused up front, before anything runs (else a run would end ``MemoryBackendError`` after
    the model was paid for), when it is not a ``str``, is empty (leave it out for a new id), or
    holds a lone surrogate (no UTF-8 for it: SQLite and PostgreSQL cannot store it) or a control
    character (PostgreSQL text cannot hold NUL; a newline is usually a line read from a file
    or a header without ``strip()``).
    """
    if session_id is None and new is not None:
        return new()
    if not isinstance(session_id, str):
        raise InvalidInput(
            f"a session id must be a str such as 'user-42', got {type(session_id).__name__}; "
            "str() it, or leave it out for a new id"
        )
    if not session_id:
        raise InvalidInput("a session id is empty; leave it out (None) for a new id")
    for char in session_id:
        code = ord(char)
        if 0xD800 <= code <= 0xDFFF:
            why = "a lone surrogate, which has no UTF-8 and cannot be stored"
            fix = "decode the bytes it came from with errors='replace', or use plain text"
        elif code < 0x20 or 0x7F <= code <= 0x9F:
            why = "a control character, which the store or a terminal cannot keep"
            fix = "strip() it (a line read from a file or a header keeps its newline)"
        else:
            continue
        raise InvalidInput(
            f"session id {session_id!r:.60} holds U+{code:04X}, {why}; {fix}, such as 'user-42'"
        )
    return session_id


def checked_store(store: object) -> Store:
    """``store`` if it implements ``Store``, else a ``ConfigurationError``."""
    from agentloop.store import Store  # the store loads only for an agent given one

    if not isinstance(store, Store):
        raise ConfigurationError("Agent store must implement agentloop.store.Store", field="store")
    return store


def recorder(store: Store | None, session_id: str, existing_ok: bool) -> SessionRecorder | None:
    """The session's recorder; a named session that already has data needs ``resume``."""
    if store is None:
        return None
    store = checked_store(store)
    if not existing_ok and store.has_session(session_id):
        raise ConfigurationError(
            f"session {session_id!r} already has stored runs; continue it with "
            "Agent.resume(session_id, store=..., client=...)",
            field="session_id",
        )
    from agentloop.store._session import SessionRecorder

    return SessionRecorder(store, session_id)


def new_session(
    agent: Definition[Any],
    session_id: str,
    store: Store | None = None,
    history: object = None,
    *,
    new: bool = False,
) -> Session[Any]:
    """A session of ``agent``, recorded on ``store`` (``new``: an id it must not hold yet)."""
    found = None if store is None else recorder(store, session_id, existing_ok=not new)
    history = NO_HISTORY if history is None else checked_history(history)  # (shared, unwritten)
    return (_Session or _load_session())(agent, session_id, recorder=found, history=history)


_Session: type[Session[Any]] | None = None
"""``agentloop.engine.session.Session``, imported with the first session (an import statement
per ``agent.session()`` cost about as much as the session's event bus)."""


def _load_session() -> type[Session[Any]]:
    global _Session
    from agentloop.engine.session import Session as session

    _Session = session
    return session


def with_memory(agent: Definition[Any], memory: object) -> None:
    """``Agent(memory=...)``: the memory tools join the agent's registry (SPEC 27).

    A tool already named ``remember``, ``recall``, ``forget`` or ``memory`` is a
    ``ConfigurationError``; so is anything but a ``Memory``. Without memory nothing loads.
    """
    if memory is None:
        return
    from agentloop.memory._capability import TOOL_NAMES, Memory

    if not isinstance(memory, Memory):
        raise ConfigurationError(
            f"memory must be agentloop.memory.Memory(store, namespace=...), got "
            f"{type(memory).__name__}",
            field="memory",
        )
    taken = [name for name in TOOL_NAMES if name in agent.registry]
    if taken:
        raise ConfigurationError(
            f"the agent already has a tool named '{taken[0]}', a name memory= gives the model "
            f"({', '.join(TOOL_NAMES)}): rename that tool",
            field="memory",
        )
    registry = ToolRegistry(list(agent.registry))  # never the caller's own registry
    for item in memory.tools(agent.client):
        registry.register(item)
    agent.registry = registry
    agent.memory = memory


def restored(agent: Any, session_id: str, store: Store, *, shared: bool) -> Session[Any]:
    """A session of ``agent`` rebuilt from ``store`` (``shared``: its breakers and health too)."""
    from agentloop.engine.refresh import closing, restore_safety
    from agentloop.engine.session import Session
    from agentloop.store._session import SessionRecorder, restore

    history, runs = restore(store, checked_session_id(session_id), closing=closing(agent))
    found = SessionRecorder(store, session_id, synced=len(history))
    found.marked()  # what a later run compares with: did another process run it meanwhile?
    session: Session[Any] = Session(
        agent, session_id, recorder=found, history=history, runs=cast(Any, runs)
    )
    restore_safety(session, store, continuing=None, shared=shared)
    return session


def batch_checked(agent: Any) -> None:
    """SPEC 25: a batch agent's graph takes batch runs, else ``ConfigurationError``."""
    if not agent.config.batch:
        return
    from agentloop.fleet._batch_client import check_agent

    check_agent(agent)


def handoffs(agent: Any, items: object) -> tuple[Any, ...]:
    """``Agent(handoffs=...)`` checked and registered (the machinery loads only when given)."""
    if not items:
        return ()
    from agentloop.engine.handoffs import checked

    return checked(agent, items)


def fork(agent: Any) -> Any:
    """``agent.fork()``: the same definition, fresh state (see ``Agent.fork``)."""
    twin = type(agent)(
        agent.client,
        tools=agent.registry,
        system=agent.system,
        config=agent.config,
        hooks=agent._hooks,
        observers=agent._observers,
        approver=agent._approver,
        clock=agent.clock,
    )
    twin.output = agent.output
    twin._guardrails = agent._guardrails
    twin._toolsets = agent._toolsets
    twin.memory, twin._provider_tools = agent.memory, agent._provider_tools
    twin.name, twin._handoffs = agent.name, agent._handoffs
    return twin
