"""The tool call's fast paths decide exactly what the general pipeline they skip decides.

A lone call nobody listens to goes through ``CallPipeline.now`` (issue 39), which writes out the
tool's lookup, the gates' test and the loop pre-check; these properties hold it to ``run``, the
general path a listened-to call takes, over arbitrary sequences of calls.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentloop import Agent, Observer, ToolError, tool
from agentloop.config import RunConfig
from agentloop.engine.call import CallPipeline
from agentloop.engine.dispatch import Dispatcher
from agentloop.engine.invoke import _fitted
from agentloop.events import Event
from agentloop.hooks import Hook
from agentloop.messages import ToolCallPart, ToolResultPart
from agentloop.safety.loops import LoopDetection
from agentloop.testing import ScriptedModel, call, reply
from agentloop.tools import ToolContext


class _Listener(Observer):
    """Somebody listening: the lone call goes the general way (``CallPipeline.run``)."""

    def on_event(self, event: Event) -> None:
        """Nothing to do: being there is enough."""


class _After(Hook):
    """A post-tool hook that does nothing: the attempt goes the general way (``_waited``)."""

    async def post_tool(self, call: ToolCallPart, result: ToolResultPart, ctx: ToolContext) -> None:
        """Nothing to do: being there is enough."""


async def _ok(key: str) -> str:
    """Awaits nothing, as an async tool."""
    return f"async {key}"


async def _waits(key: str) -> str:
    """Waits once."""
    await asyncio.sleep(0)
    return f"waited {key}"


async def _soft(key: str) -> str:
    """A soft error, without waiting."""
    raise ToolError(f"no {key}")


async def _sick(key: str) -> str:
    """A broken tool, without waiting."""
    raise RuntimeError(f"broken {key}")


def _sick_in_a_thread(key: str) -> str:
    """A broken sync tool (it runs on a worker thread: it waits)."""
    raise RuntimeError(f"broken {key}")


_TOOLS = {"a": _ok, "w": _waits, "e": _soft, "x": _sick, "t": _sick_in_a_thread}


def _ended(names: list[str], config: RunConfig, listening: bool) -> tuple[object, ...]:
    """The last request, how the run ended and the tool breakers, each call's arguments alike.

    ``listening``: a listener and a post-tool hook, so each call takes the general path.
    """
    script = [call(name, {"key": "k"}) for name in names] + [reply("end")]
    model = ScriptedModel(script)
    tools = [tool(name=name)(function) for name, function in _TOOLS.items()]
    observers = [_Listener()] if listening else []
    hooks = [_After()] if listening else []  # (the attempt's general path: ``_waited``)
    agent = Agent(model, tools=tools, observers=observers, hooks=hooks, config=config)
    try:
        run = asyncio.run(agent.run("go"))
    except Exception as exc:
        ended = f"{type(exc).__name__}: {exc}"
    else:
        ended = f"{run.output} {[turn.warnings for turn in run.turns]}"
    breakers = {
        name: (c["state"], c["generation"], c["consecutive_failures"], c["counts"], c["ewma"])
        for name, c in agent.safety.breakers.snapshot()["tools"].items()
    }
    return list(model.requests[-1].messages), ended, breakers


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.sampled_from([*_TOOLS, "missing"]), min_size=1, max_size=8),
    st.integers(1, 3),
    st.integers(0, 4),
)
def test_a_lone_call_is_checked_for_loops_as_the_general_pipeline_checks_it(
    names: list[str], warn: int, stop: int
) -> None:
    """Repeated calls reach the loop detector's lines and the breaker's alike, listened or not."""
    config = RunConfig(
        loop_detection=LoopDetection(warn_threshold=warn, stop_threshold=stop, window=10)
    )
    assert _ended(names, config, False) == _ended(names, config, True)


class _OwnClock(asyncio.SelectorEventLoop):
    """A loop whose clock is not the system's: an hour ahead of it."""

    def time(self) -> float:
        """The system's monotonic clock, an hour on."""
        return super().time() + 3600.0


@tool(timeout=5)
async def _waits_briefly(key: str) -> str:
    """Waits a little, well within its timeout, by the loop's own clock."""
    await asyncio.sleep(0.01)
    return f"waited {key}"


def test_a_tools_deadline_is_read_from_the_loops_own_clock() -> None:
    """A loop with its own ``time()`` times a tool by it (the stock loop's is read directly)."""
    model = ScriptedModel([call("_waits_briefly", {"key": "k"}), reply("end")])
    agent = Agent(model, tools=[_waits_briefly])
    with asyncio.Runner(loop_factory=_OwnClock) as runner:
        run = runner.run(agent.run("go"))
    assert run.output == "end"
    result = model.requests[-1].messages[-1].parts[0]
    assert isinstance(result, ToolResultPart)
    assert result.content == "waited k"  # not timed out


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 40), st.integers(0, 40), st.text(max_size=60))
def test_a_result_begin_keeps_whole_is_one_fitted_keeps_whole(
    limit: int, window: int, text: str
) -> None:
    """``begin``'s test for an output nothing cuts agrees with ``_fitted``."""
    config = RunConfig(max_tool_output_chars=limit, context_window=window)
    if not config.max_tool_output_chars and len(text) <= config.context_window:
        assert _fitted(config, text) == text


def _context_of(listening: bool) -> dict[str, object]:
    """What a tool's context holds in a lone call, listened to or not (ids as the run's)."""
    seen: list[ToolContext[str]] = []

    @tool(name="look")
    def look(ctx: ToolContext[str], key: str) -> str:
        """Keeps its context."""
        seen.append(ctx)
        return key

    model = ScriptedModel([call("look", {"key": "k"}), reply("end")])
    agent = Agent(model, tools=[look], observers=[_Listener()] if listening else [])
    session = agent.session()
    run = asyncio.run(session.run("go", deps="the deps"))
    ctx = seen[0]
    slots = {name for kind in type(ctx).__mro__ for name in getattr(kind, "__slots__", ())}
    held = {name: getattr(ctx, name) for name in slots - {"run_id", "session_id", "_link"}}
    held["ids"] = (ctx.run_id == run.id, ctx.session_id == session.id)
    held["cancel"] = type(ctx.cancel).__name__
    held["link"] = type(ctx._link).__name__, len(ctx._link)
    return held


def test_a_lone_calls_context_is_the_one_the_general_pipeline_makes() -> None:
    """``now`` writes the context out as ``_context`` makes it."""
    assert _context_of(False) == _context_of(True)


def test_a_lone_pipeline_is_the_one_its_constructor_makes(monkeypatch: pytest.MonkeyPatch) -> None:
    """``Dispatcher.lone`` writes ``CallPipeline.__init__`` out: every slot as it sets it."""
    made: list[tuple[dict[str, object], dict[str, object]]] = []
    lone = Dispatcher.lone

    def kept(self: Dispatcher, state: Any, calls: Any, answered: Any, quiet: Any) -> Any:
        pipeline = lone(self, state, calls, answered, quiet)
        if pipeline is not None:
            general = CallPipeline(self, state, calls[0])
            slots = {n for kind in CallPipeline.__mro__ for n in getattr(kind, "__slots__", ())}
            made.append(
                (
                    {name: getattr(pipeline, name) for name in slots},
                    {name: getattr(general, name) for name in slots},
                )
            )
        return pipeline

    monkeypatch.setattr(Dispatcher, "lone", kept)
    model = ScriptedModel([call("a", {"key": "k"}), reply("end")])
    asyncio.run(Agent(model, tools=[tool(name="a")(_ok)]).run("go"))
    assert len(made) == 1
    assert made[0][0] == made[0][1]
