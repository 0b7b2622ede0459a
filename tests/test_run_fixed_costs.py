"""What a run and a session pay once, written out, is what the general step would have made.

Issue 39 wrote some of a run's and a session's one-time steps out where they are taken: a
``str`` input's message without ``Message.from_input``, a session's limits gate setting its
event-channel fields without ``EventBus.__init__``, a run's tokens watched on the loop it read
once (``CancelToken._watch_on``, the lock taken by hand). These tests hold each to the step it
replaces.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentloop import Agent, CancelToken, RunConfig
from agentloop.engine.limits import Limits
from agentloop.errors import Cancelled
from agentloop.messages import Message
from agentloop.observers import EventBus, Observer
from agentloop.testing import FunctionModel, RecordingObserver, ScriptedModel, reply

pytestmark = pytest.mark.usefixtures("no_real_sleep")


def _bus_fields(bus: EventBus) -> dict[str, Any]:
    fields = {name: getattr(bus, name) for name in EventBus.__slots__}
    fields["_observers"] = [  # an observer's legacy handlers: by event and method name
        (o, None if h is None else {k: v[0] for k, v in h.items()}) for o, h in bus._observers
    ]
    return fields


@pytest.mark.parametrize("observers", [(), [], [RecordingObserver()], [Observer()]])
def test_a_limits_gate_is_the_event_channel_eventbus_init_makes(observers: Any) -> None:
    limits = Limits(RunConfig(), observers, "s1", lambda: 0.0)
    assert _bus_fields(limits) == _bus_fields(EventBus(observers, "s1"))


@given(st.text(max_size=20))
def test_a_str_input_makes_the_message_from_input_makes(text: str) -> None:
    session = Agent(ScriptedModel([])).session()
    state = session._begin(text, None, (), None)
    assert state.transcript[-1] == Message.from_input(text) and state.run.input == text
    assert type(state.transcript[-1].parts) is tuple


class _Text(str):
    """A ``str`` subclass: the general path, as before."""


async def test_other_inputs_take_the_general_path() -> None:
    model = ScriptedModel([reply("a"), reply("b")])
    session = Agent(model).session()
    run = await session.run(_Text("hi"))
    assert run.input == "hi" and model.requests[0].messages[-1] == Message.user("hi")
    run = await session.run(["one", "two"])
    assert run.input == ("one", "two")
    assert model.requests[1].messages[-1] == Message.from_input(["one", "two"])


async def test_a_token_watched_on_a_given_loop_is_watched_as_watch_does() -> None:
    loop = asyncio.get_running_loop()
    fired: list[str] = []

    def first() -> None:
        fired.append("first")

    def second() -> None:
        fired.append("second")

    by_hand, public = CancelToken(), CancelToken()
    by_hand._watch_on(loop, first)
    by_hand._watch_on(loop, second)
    assert public.watch(first) == id(first) and public.watch(second) == id(second)
    for token in (by_hand, public):
        assert (token._loop, token._callback) == (loop, first)
        assert token._watchers == {id(second): (loop, second)}
    for token in (by_hand, public):
        token.unwatch(id(second))
        token.cancel()
    await asyncio.sleep(0)
    assert fired == ["first", "first"]


async def test_a_session_cancel_still_reaches_its_running_run() -> None:
    started, never = asyncio.Event(), asyncio.Event()

    async def hang(request: Any) -> str:
        started.set()
        await never.wait()
        return "never"

    session = Agent(FunctionModel(hang)).session()
    work = asyncio.ensure_future(session.run("go"))
    await started.wait()
    session.cancel()
    with pytest.raises(Cancelled):
        await work
    assert session.cancel_token._callback is None and not session.cancel_token.cancelled


async def test_a_run_commits_its_messages_once_made_and_keeps_its_own_list() -> None:
    model = ScriptedModel([reply("a"), reply("b")])
    session = Agent(model).session()
    first = await session.run("one")
    second = await session.run("two")
    assert session.history == [*first.messages, *second.messages]
    assert [m.text for m in session.history] == ["one", "a", "two", "b"]
    assert first.messages is not session._history and second.messages is not session._history
    session._history.append(Message.user("later"))  # the history grows; the runs' lists do not
    assert len(first.messages) == len(second.messages) == 2
