"""A long conversation costs each run its new messages, not its whole history (issue 26).

A run that commits everything leaves the session what it measured (``Measured``): the next run
on the same history counts and checks only its own messages, and gets the same totals and the
same verdicts as a run that measured everything again.
"""

from __future__ import annotations

import pytest

from agentloop import Agent, RunConfig, tool
from agentloop.engine.context_guard import ContextGuard
from agentloop.errors import TranscriptError
from agentloop.messages import Message
from agentloop.observers import EventBus
from agentloop.testing import FunctionModel, call, reply
from agentloop.tokens import HeuristicTokenCounter
from agentloop.transcript import TranscriptChecker


class CountingCounter(HeuristicTokenCounter):
    """The default counter, counting the messages it is asked about."""

    __slots__ = ("asked",)

    def __init__(self) -> None:
        super().__init__()
        self.asked = 0

    def count_message(self, message: Message) -> int:
        self.asked += 1
        return super().count_message(message)


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def tool_then_answer(request: object) -> object:
    last = request.messages[-1]  # type: ignore[attr-defined]
    return reply("done") if last.role == "tool" else call("lookup", {"key": "k"})


async def test_a_run_on_a_long_history_counts_only_its_own_messages() -> None:
    counter = CountingCounter()
    agent = Agent(
        FunctionModel(tool_then_answer), tools=[lookup], config=RunConfig(token_counter=counter)
    )
    session = agent.session()
    for _ in range(30):
        await session.run("go")
    assert len(session.history) == 120
    counter.asked = 0
    await session.run("go")
    # the input, the call, the results, the answer; the request estimate may count a few more
    # of the run's own messages, never the 120 before them
    assert counter.asked <= 8


async def test_the_known_history_gives_the_same_totals_as_measuring_it_again() -> None:
    agent = Agent(FunctionModel(tool_then_answer), tools=[lookup])
    session = agent.session()
    for _ in range(5):
        await session.run("go")
    known = session._measured
    assert known is not None and known.holds(session._history)
    transcript = [*session._history, Message.user("next")]
    specs = agent._offer(agent.client).specs
    fresh, resumed = (
        ContextGuard(agent.config, system=None, observers=EventBus((), "s"), hooks=())
        for _ in range(2)
    )
    fresh.start(transcript, specs)
    resumed.start(transcript, specs, known)
    assert resumed.total == fresh.total
    assert resumed._checkpoint() == fresh._checkpoint()
    assert resumed._count == fresh._count == len(transcript)


async def test_a_history_changed_since_is_measured_again() -> None:
    agent = Agent(FunctionModel(tool_then_answer), tools=[lookup])
    session = agent.session()
    await session.run("go")
    known = session._measured
    assert known is not None
    assert not known.holds(list(session._history))  # another list
    session._history.append(Message.user("x"))
    assert not known.holds(session._history)  # another length
    await session.run("go")  # measured afresh: the odd history still runs
    assert session._measured is not None and session._measured.holds(session._history)


async def test_a_failed_run_leaves_nothing_known() -> None:
    def fails_second(request: object) -> object:
        if len(request.messages) > 4:  # type: ignore[attr-defined]
            raise ValueError("model broke")
        return tool_then_answer(request)

    agent = Agent(FunctionModel(fails_second), tools=[lookup])
    session = agent.session()
    await session.run("go")
    assert session._measured is not None
    with pytest.raises(Exception):  # noqa: B017 - any hard error: the run failed
        await session.run("again")
    assert session._measured is None


def test_a_resumed_checker_still_refuses_a_bad_message() -> None:
    first = TranscriptChecker(unique_ids=False)
    first.extend([Message.user("hi"), Message.assistant("hello")])
    resumed = TranscriptChecker(unique_ids=False)
    resumed.resume(*first.state())
    with pytest.raises(TranscriptError, match="message 2"):
        resumed.append(Message.tool_results(()))


def test_a_checker_of_unique_ids_cannot_be_resumed() -> None:
    with pytest.raises(ValueError, match="cannot be resumed"):
        TranscriptChecker().state()
