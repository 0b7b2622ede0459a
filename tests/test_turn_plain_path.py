"""The common model call's written-out steps decide what the general steps decide.

``ModelStep._plain_request`` writes out ``check_cancel``, ``ready``'s quiet path and
``_request`` (issue 39: calls a turn fewer). These tests run the same scripts through it and
through the general steps, each through its own call, and compare what the model was sent and
what the run recorded.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

import pytest

from agentloop import Agent, Observer, RunConfig, tool
from agentloop.engine.calls_step import CallStep
from agentloop.engine.context_guard import ContextGuard
from agentloop.engine.model_step import ModelStep
from agentloop.engine.output import cut_calls
from agentloop.errors import AgentLoopError, TranscriptError
from agentloop.events import Event
from agentloop.messages import Message, TextPart, ToolCallPart, ToolResultPart, Usage
from agentloop.model import ModelRequest, ModelResponse
from agentloop.observers import EventBus
from agentloop.run import TRUNCATION_REASONS
from agentloop.safety.budget import Budget
from agentloop.testing import ScriptedModel, call, reply


def _general_request(self: Any) -> ModelRequest | None:
    """``_plain_request`` as the general steps take it, each through its own call."""
    self.check_cancel()
    self.session.safety.before_request(self.run, self.turn_index)
    if (
        self.guarding is not None
        or self.config.stream
        or self.stream
        or self._offering()
        or not self.ready()
    ):
        return None
    request: ModelRequest = self._request()
    self.started = self.session._dispatcher.monotonic()
    if self.session._bus.active:
        self.check_cancel()
    return request


class _Listener(Observer):
    def __init__(self) -> None:
        self.kinds: list[str] = []

    def on_event(self, event: Event) -> None:
        self.kinds.append(type(event).__name__)


def _lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


_CASES: dict[str, dict[str, Any]] = {
    "plain": {},
    "system": {"system": "Be brief."},
    "listened": {"listen": True},
    "small window": {"config": RunConfig(context_window=60, compact_threshold=0.5)},
    "refused": {"config": RunConfig(context_window=8)},
    "one turn": {"config": RunConfig(max_turns=1)},
    "budget of one turn": {"config": RunConfig(budget=Budget(turns=1))},
    "budget of tokens": {"config": RunConfig(budget=Budget(tokens=60, soft_fraction=0.1))},
}


def _run(case: dict[str, Any]) -> tuple[list[ModelRequest], str, Any, list[str]]:
    script = [call("lookup", {"key": "k"}, id="c1"), call("lookup", {"key": "j"}), reply("done")]
    model = ScriptedModel(script)
    listener = _Listener()
    agent = Agent(
        model,
        tools=[tool(name="lookup")(_lookup)],
        system=case.get("system"),
        config=case.get("config", RunConfig()),
        observers=[listener] if case.get("listen") else [],
    )
    session = agent.session()
    try:
        run = asyncio.run(session.run("go"))
        outcome: Any = (run.output, [(t.text, t.tool_calls, t.usage) for t in run.turns])
    except AgentLoopError as error:
        outcome = type(error).__name__, str(error)
    return model.requests, session.id, outcome, listener.kinds


@pytest.mark.parametrize("name", sorted(_CASES))
def test_the_plain_request_is_the_general_request(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    case = _CASES[name]
    plain, plain_id, plain_outcome, plain_events = _run(case)
    monkeypatch.setattr(ModelStep, "_plain_request", _general_request)
    general, general_id, general_outcome, general_events = _run(case)
    assert plain_outcome == general_outcome
    assert plain_events == general_events
    assert len(plain) == len(general)
    for mine, theirs in zip(plain, general, strict=True):
        assert mine.session_id == plain_id and theirs.session_id == general_id
        for field in ("messages", "tools", "system", "settings", "model", "output"):
            assert getattr(mine, field) == getattr(theirs, field), field
        assert (mine.compact_at, mine.provider_tools) == (theirs.compact_at, theirs.provider_tools)
        assert type(mine.events) is type(theirs.events)


def test_a_replys_spend_is_counted_as_the_gate_counts_it() -> None:
    """``_responded`` counts a reply's tokens itself while no line is drawn (``Limits.spent``)."""
    spent = []
    for config in (RunConfig(), RunConfig(budget=Budget(tokens=10**9, turns=99))):
        asked = Message("assistant", (ToolCallPart("c1", "lookup", {"key": "k"}),))
        script = [
            ModelResponse(asked, usage=Usage(7, 3, 2)),
            ModelResponse(Message.assistant("done"), usage=Usage(11, 5, 0, 1, 4)),
        ]
        session = Agent(
            ScriptedModel(script), tools=[tool(name="lookup")(_lookup)], config=config
        ).session()
        asyncio.run(session.run("go"))
        gate = session.safety.budget
        spent.append({k: gate.spent(k) for k in ("tokens", "output_tokens", "turns")})
    assert spent[0] == spent[1] == {"tokens": 26, "output_tokens": 8, "turns": 2}


async def _waits(key: str) -> str:
    """Waits once."""
    await asyncio.sleep(0)
    return f"waited {key}"


async def _at_once(key: str) -> str:
    """Never waits: its answer without a coroutine to await (``CallPipeline.now``)."""
    return f"at once {key}"


async def _broken(key: str) -> str:
    """A broken tool that never waits."""
    raise RuntimeError(f"broken {key}")


def _through_dispatch(self: Any, turn: Any, response: ModelResponse, calls: Any) -> Awaitable[None]:
    """``_dispatched`` as the general step takes every turn's calls: ``_dispatch``, awaited."""
    if response.stop_reason in TRUNCATION_REASONS:
        return self._dispatch(turn, calls, answered=cut_calls(response))  # type: ignore[no-any-return]
    return self._dispatch(turn, calls)  # type: ignore[no-any-return]


@pytest.mark.parametrize("name", ["_at_once", "_lookup", "_waits", "_broken", "missing"])
def test_a_lone_call_is_answered_as_the_dispatch_answers_it(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``CallStep._dispatched``'s lone call: the run the general ``_dispatch`` records."""
    tools = [tool(name=f.__name__)(f) for f in (_at_once, _lookup, _waits, _broken)]
    runs = []
    for general in (False, True):
        if general:
            monkeypatch.setattr(CallStep, "_dispatched", _through_dispatch)
        script = [call(name, {"key": "k"}, id="c1"), call(name, {"key": "j"}), reply("done")]
        run = asyncio.run(Agent(ScriptedModel(script), tools=tools).run("go"))
        runs.append((run.output, [(t.tool_calls, t.tool_results) for t in run.turns], run.messages))
    assert runs[0] == runs[1]


@pytest.mark.parametrize(
    "parts",
    [
        (TextPart("one"),),
        (TextPart(""),),
        (TextPart("a"), TextPart("b")),
        (ToolCallPart("c", "t", {}),),
        (TextPart("a"), ToolCallPart("c", "t", {}), TextPart("b")),
        (),
    ],
)
def test_a_messages_text_is_its_text_parts_joined(parts: tuple[Any, ...]) -> None:
    """``Message.text`` reads a one-text message's part itself; any other joins its texts."""
    message = Message("assistant", parts)
    joined = "".join(p.text for p in parts if isinstance(p, TextPart))
    assert message.text == joined and message.text == joined  # (read twice: kept or not)


class _GeneralGuard(ContextGuard):
    """A guard whose every message takes the general path (``_added``: counter, rules)."""

    __slots__ = ()

    def added(self, message: Message) -> None:
        self._added(message)


_USER, _CALL = Message.user("hi"), Message("assistant", (ToolCallPart("c", "t", {}),))
_RESULT = Message("tool", (ToolResultPart("c", "t", "r"),))


@pytest.mark.parametrize(
    "appended",
    [
        [_USER, Message.assistant("a"), Message.assistant("b"), _USER],
        [_USER, _CALL, _RESULT, Message.assistant("done")],
        [_USER, _CALL, _USER],  # a text while a call waits
        [_USER, _CALL, Message("tool", (ToolResultPart("d", "t", "r"),))],  # not its call
        [_USER, _RESULT],  # no call waits
        [_USER, _CALL, _RESULT, _RESULT],
        [_USER, _CALL, Message.system("s"), _RESULT],  # not just after it
        [_RESULT],
        [_CALL],  # a call cannot open the transcript
        [_USER, _CALL, _CALL],  # a call while one waits
        [_USER, Message("user", (ToolCallPart("c", "t", {}),))],
        [_USER, _CALL, _RESULT, _CALL, _RESULT],  # one id again, in the next turn
        [_USER, _CALL, Message.assistant("no")],
        [Message.assistant("first")],  # a reply cannot open the transcript
        [Message.user("")],  # nor can an empty text
        [_USER, Message.assistant("")],
        [_USER, Message.system("s"), Message.assistant("a")],
    ],
)
def test_an_appended_text_is_checked_as_the_rules_check_it(appended: list[Message]) -> None:
    """``ContextGuard.added``'s one-text check decides what ``_one_part`` and ``_absorb`` do."""
    outcomes = []
    for kind in (ContextGuard, _GeneralGuard):
        guard = kind(RunConfig(), system=None, observers=EventBus(()), hooks=())
        guard.start([], ())
        seen: list[object] = []
        for message in appended:
            try:
                guard.added(message)
            except TranscriptError as error:
                seen.append(str(error))
                break
            seen.append((guard.total, guard._checkpoint()))
        outcomes.append(seen)
    assert outcomes[0] == outcomes[1]
