"""What every conversation of one agent shares: its definition.

An ``Agent`` is built once and shared by every request of an application; each conversation is a
``Session`` (``agentloop.engine.session``). This module holds the shared half, so that sessions
and the run loop depend on it and never on ``Agent`` itself: the model client (one connection
pool for all sessions), the tools and tool sources (MCP servers), the prompt, the config, the
output type, hooks, observers, approver and guardrails, the store, and the tool breakers (a sick
tool is sick for every session). Model health lives in the client (a ``FallbackClient``), so it
is shared too.

``run_sync``'s private event loop is shared as well: a client's connections belong to the loop
that opened them, so every sync call of every session runs on the one loop, from one thread at a
time.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
import weakref
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from agentloop.clock import Clock
from agentloop.config import RunConfig
from agentloop.engine.instructions import Instructions, Prompt
from agentloop.engine.output import FINAL_RESULT, OutputType
from agentloop.engine.toolsets import Toolsets
from agentloop.errors import InvalidInput
from agentloop.model import ModelClient
from agentloop.run import OutputT
from agentloop.safety.breaker import ToolBreakers
from agentloop.tools import ToolRegistry

if TYPE_CHECKING:  # guardrails, a store, a run's state: loaded only when used
    from agentloop.engine.guarding import Guardrails
    from agentloop.engine.state import Offer, RunState
    from agentloop.hooks import Approver, Hook
    from agentloop.memory import Memory
    from agentloop.observers import Observer
    from agentloop.provider_tools import ProviderTool
    from agentloop.store import Store

__all__ = ["Definition"]

logger = logging.getLogger("agentloop")

_NATIVE_PROVIDERS = frozenset({"openai", "openrouter", "ollama", "gemini", "azure"})

T = TypeVar("T")


class Definition(Generic[OutputT]):
    """The shared half of an agent (``Agent`` is one): read by every session's runs.

    Own attributes: what ``Agent.__init__`` sets is in the instance's dict, and the run's fixed
    path reads it there through the dict its session took once (``vars(agent)`` itself pays the
    hook below, about 1,000 instructions). An attribute read of an ``Agent`` goes through its
    ``__getattr__`` hook (SPEC 21's hints for a peer's name): on Python 3.11 about 300
    instructions where a dict lookup costs 30. Class-level defaults (``memory``,
    ``_provider_tools``) and methods are read as attributes, or on the class.
    """

    client: ModelClient
    clock: Clock
    registry: ToolRegistry
    system: Instructions | None
    """The system prompt as given: text, or a function evaluated per run (``_prompt``)."""
    _prompt: Prompt | None
    """The system prompt's function, called with the run's context (None for text)."""
    config: RunConfig
    output: OutputType[Any] | None
    store: Store | None
    breakers: ToolBreakers
    memory: Memory | None = None
    """Long-term memory (SPEC 27; ``agentloop.engine.remembering``), or None."""
    _toolsets: Toolsets
    _hooks: tuple[Hook, ...]
    _observers: tuple[Observer, ...]
    _approver: Approver | None
    _guardrails: Guardrails | None
    """Input and output guardrails (``agentloop.engine.guarding``); None when there are none."""
    _runner: asyncio.Runner | None
    _closer: weakref.finalize[Any, Any] | None
    _sync_thread: int | None
    _last_offer: Offer
    """The offer the last run made, reused while its specs are the same objects."""
    _provider_tools: tuple[ProviderTool, ...] = ()
    """Tools the provider runs itself (SPEC 24), offered on every request."""

    # -- what a run reads ----------------------------------------------------------------------

    @property
    def _sets(self) -> tuple[Any, ...]:
        """``Agent(toolsets=...)`` (SPEC 22)."""
        return self._toolsets.sets

    def _offer(self, client: ModelClient, registry: ToolRegistry | None = None) -> Offer:
        """The tools advertised to the model: the registry's, and ``final_result`` if typed.

        With native structured output (an ``output_type``, ``output_mode="native"`` and a
        provider that has it) the answer's schema goes in the request instead. ``registry``:
        the run's own (``agent.override(tools=...)``), else the agent's.
        """
        output = self.output
        native = (
            output is not None
            and self.config.output_mode == "native"
            and client.provider in _NATIVE_PROVIDERS
        )
        specs = (self.registry if registry is None else registry).specs()
        if output is not None and not native and self.config.output_mode != "text":
            if any(s.name == FINAL_RESULT for s in specs):  # a tool source's: the answer wins
                logger.warning(
                    "a tool named '%s' is not offered: the name is the typed answer's", FINAL_RESULT
                )
                specs = tuple(s for s in specs if s.name != FINAL_RESULT)
            specs = (*specs, output.tool_spec)
        last: Offer | None = self.__dict__.get("_last_offer")
        if last is not None and last.native_output == native and last.specs == specs:
            return last  # the same specs as the last run's (one per tool, built once: a tuple
            # compares its items by identity first, so this is one C loop, no generator)
        from agentloop.engine.state import Offer  # a run's state loads with the first run

        offer = self._last_offer = Offer(specs, native, self._provider_tools)
        return offer

    async def _refresh_tools(self, state: RunState, *, starting: bool) -> None:
        """List tool sources that changed (MCP servers) and re-advertise the tools."""
        if await self._toolsets.refresh(starting=starting):
            state.offer = self._offer(state.client, state.registry)

    def _system(self, prompt: str | None = None) -> str | None:
        """The system prompt; ``"text"`` output mode adds the answer's JSON schema to it.

        ``prompt``: this run's text of a prompt function (ignored when the prompt is text).
        """
        base = self.system if self._prompt is None else prompt
        assert base is None or isinstance(base, str)
        output = self.output
        if output is None or self.config.output_mode != "text" or output.is_text:
            return base
        extra = output.instructions()
        return extra if not base else f"{base}\n\n{extra}"

    # -- the shared sync loop ------------------------------------------------------------------

    def _run_sync(self, work: Coroutine[Any, Any, T]) -> T:
        """Run ``work`` on the private loop ``run_sync`` keeps (one thread at a time)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            work.close()
            raise InvalidInput("run_sync() was called inside a running event loop; await run()")
        me = threading.get_ident()
        if self._sync_thread is not None and self._sync_thread != me:
            work.close()
            raise InvalidInput(
                "run_sync() is serving another thread on this agent; serve many conversations "
                "with the async API (await agent.session(...).run(...))"
            )
        if self._runner is None:
            # a loop factory: the runner then never sets (nor, when it closes, unsets) the
            # thread's current event loop, so an agent collected later cannot clobber a loop
            # someone else set in this thread
            self._runner = asyncio.Runner(loop_factory=asyncio.new_event_loop)
            self._closer = weakref.finalize(self, _shut, self._runner, self.client, self._toolsets)
        self._sync_thread = me
        try:
            # the caller's context now (a Runner keeps the one of its first call otherwise):
            # an override or cassette entered since then holds for this run too
            return self._runner.run(work, context=contextvars.copy_context())
        except (KeyboardInterrupt, SystemExit):
            self._close_runner()  # interrupted mid-step: the next call gets a fresh loop
            raise
        except BaseException as error:  # the loop's frames it left hold the run's task: let go
            from agentloop.engine.frames import released

            released(error)
            raise
        finally:
            self._sync_thread = None

    def _close_runner(self) -> bool:
        """Shut the private loop (and the client on it); False when there was none."""
        if self._closer is None:
            return False
        self._closer()
        self._closer = None
        self._runner = None
        return True


def _shut(runner: asyncio.Runner, client: ModelClient, toolsets: Toolsets) -> None:
    """Stop tool servers and close ``client`` on ``run_sync``'s private loop, then the loop.

    Runs at ``close()``, garbage collection or interpreter exit. When another loop runs in this
    thread (the agent was collected inside async code), the private loop cannot run here, so it
    is shut from a short-lived thread.
    """
    if asyncio.events._get_running_loop() is not None:
        worker = threading.Thread(
            target=_shut, args=(runner, client, toolsets), name="agentloop-close"
        )
        worker.start()
        worker.join()
        return
    for close in (toolsets.aclose, client.aclose):
        for _ in range(3):  # a KeyboardInterrupt left pending in the loop surfaces here, once
            try:
                runner.run(close())
                break
            except BaseException:
                logger.debug("closing on run_sync's loop failed", exc_info=True)
    try:
        runner.close()
    except BaseException:
        logger.debug("closing run_sync's event loop failed", exc_info=True)
