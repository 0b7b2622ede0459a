"""The per-turn fast paths decide exactly what the general computation they skip decides.

Each fast path of the engine's turn (issue 39) is a shortcut for a common case; these properties
hold it to the general path over arbitrary inputs: the context guard's quiet line, the transcript
checker's one-part messages, a message's token count, a usage sum and a lone tool call.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentloop import Agent, Observer, ToolError, tool
from agentloop._provider_parts import NO_CALLS, counted_calls
from agentloop.config import RunConfig
from agentloop.context import WindowPolicy
from agentloop.engine.context_guard import ContextGuard, quiet_line
from agentloop.errors import Cancelled, TranscriptError
from agentloop.events import Event, TurnStarted
from agentloop.media import ImagePart
from agentloop.messages import (
    Message,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
)
from agentloop.model import ModelResponse
from agentloop.observers import EventBus
from agentloop.run import _NO_USAGE
from agentloop.testing import ScriptedModel, call, reply
from agentloop.tokens import HeuristicTokenCounter, RatioTokenCounter, counted_media
from agentloop.transcript import TranscriptChecker

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 24

policies = st.builds(
    WindowPolicy,
    window=st.integers(0, 2_000_000),
    threshold=st.floats(0.0, 1.0),
    auto_compact=st.booleans(),
)


@settings(max_examples=300, deadline=None)
@given(policies, st.integers(0, 2_500_000))
def test_at_or_below_the_quiet_line_nothing_compacts_and_everything_fits(
    policy: WindowPolicy, total: int
) -> None:
    quiet = quiet_line(policy)
    if total <= quiet:
        assert policy.need(total) is None
        assert policy.fits(total)


@settings(max_examples=300, deadline=None)
@given(policies)
def test_the_quiet_line_is_the_last_such_estimate(policy: WindowPolicy) -> None:
    quiet = quiet_line(policy)
    if policy.enabled:
        assert policy.need(quiet + 1) is not None or not policy.fits(quiet + 1)


class _General(TranscriptChecker):
    """A checker that never takes the one-part path: the general rules decide every message."""

    __slots__ = ()

    def _one_part(self, index: int, role: str, part: object) -> bool:
        return False


_IDS = ("a", "b")
parts = st.one_of(
    st.builds(TextPart, st.sampled_from(("", "hi"))),
    st.builds(ToolCallPart, st.sampled_from(_IDS), st.just("t"), st.just({})),
    st.builds(ToolResultPart, st.sampled_from(_IDS), st.just("t"), st.just("r")),
)
messages = st.builds(
    Message,
    st.sampled_from(("user", "assistant", "tool", "system")),
    st.lists(parts, min_size=1, max_size=2).map(tuple),
)


def _absorb(checker: TranscriptChecker, message: Message) -> str | None:
    try:
        checker.append(message)
    except TranscriptError as error:
        return str(error)
    return None


@settings(max_examples=400, deadline=None)
@given(st.lists(messages, max_size=8), st.booleans())
def test_one_part_messages_are_checked_as_the_general_rules_check_them(
    transcript: list[Message], unique: bool
) -> None:
    fast, general = TranscriptChecker(unique_ids=unique), _General(unique_ids=unique)
    for message in transcript:
        failed = _absorb(fast, message)
        assert failed == _absorb(general, message)
        if failed is not None:
            return
        assert len(fast) == len(general)
        assert fast.pending_calls == general.pending_calls
        if not unique:
            assert fast._checkpoint() == general._checkpoint()
    assert _sendable(fast) == _sendable(general)


def _sendable(checker: TranscriptChecker) -> str | None:
    try:
        checker.check_sendable()
    except TranscriptError as error:
        return str(error)
    return None


counted = st.one_of(
    st.builds(TextPart, st.text(max_size=20)),
    st.builds(ToolCallPart, st.text(min_size=1, max_size=5), st.just("t"), st.just({"k": "v"})),
    st.builds(ToolResultPart, st.just("c"), st.just("t"), st.text(max_size=20)),
    st.just(ToolResultPart("c", "t", "r", media=(ImagePart(PNG),))),
    st.just(ImagePart(PNG)),
)


_ROLES = ("user", "assistant", "tool")


@pytest.mark.parametrize("counter", [HeuristicTokenCounter(), RatioTokenCounter(3.6, 5)])
def test_a_message_counts_its_text_and_its_media(counter: RatioTokenCounter) -> None:
    @settings(max_examples=200, deadline=None)
    @given(st.sampled_from(_ROLES), st.lists(counted, min_size=1, max_size=3))
    def check(role: str, message_parts: list[object]) -> None:
        message = Message(role, tuple(message_parts))  # type: ignore[arg-type]
        expected = counter._count(message) + counted_media(message)
        assert counter.count_message(message) == expected
        assert counter.count_message(message) == expected  # cached: the same

    check()


def test_the_overhead_asked_again_with_the_same_tools_is_the_same_as_measured_afresh() -> None:
    from agentloop.model import ToolSpec
    from agentloop.tokens import _measure_overhead, request_overhead

    tools = (ToolSpec("lookup", "Look a key up.", {"type": "object", "properties": {}}),)
    first, second = HeuristicTokenCounter(), RatioTokenCounter(3.6, 5)
    for system in ("You help.", None, "You help."):
        for counter in (first, second, first):
            expected = _measure_overhead(system, tools, counter)
            assert request_overhead(system, tools, counter) == expected
            assert request_overhead(system, tools, counter) == expected  # the fast answer
            assert request_overhead(system, list(tools), counter) == expected
            assert request_overhead(system, (), counter) == _measure_overhead(system, (), counter)


counts = st.integers(0, 10**9)
provider_calls = st.one_of(
    st.just(NO_CALLS),
    st.dictionaries(st.sampled_from(["web_search", "code", "x"]), st.integers(0, 9), max_size=3),
)
usages = st.builds(
    Usage, counts, counts, counts, counts, counts, provider_tool_calls=provider_calls
)


@settings(max_examples=300, deadline=None)
@given(usages, usages)
def test_usage_sums_as_the_keyword_construction_does(first: Usage, second: Usage) -> None:
    """``Usage.__add__`` builds positionally and sets the provider calls itself: the same sum."""
    mine, theirs = first.provider_tool_calls, second.provider_tool_calls
    calls = mine if theirs is NO_CALLS or not theirs else counted_calls(mine, theirs, 1)
    expected = Usage(
        first.input_tokens + second.input_tokens,
        first.output_tokens + second.output_tokens,
        first.cache_read_tokens + second.cache_read_tokens,
        first.cache_write_tokens + second.cache_write_tokens,
        first.reasoning_tokens + second.reasoning_tokens,
        provider_tool_calls=calls,
    )
    total = first + second
    assert total == expected
    assert dict(total.provider_tool_calls) == dict(expected.provider_tool_calls)
    assert (total.provider_tool_calls is NO_CALLS) == (expected.provider_tool_calls is NO_CALLS)
    same = first + first  # the one mapping on both sides counts twice
    assert dict(same.provider_tool_calls) == dict(counted_calls(mine, mine, 1) if mine else mine)


class _Listener(Observer):
    """Somebody listening: the lone call goes the general way (``CallPipeline.run``)."""

    def on_event(self, event: Event) -> None:
        """Nothing to do: being there is enough."""


async def _ok(key: str) -> str:
    """Awaits."""
    return f"async {key}"


def _sync_ok(key: str) -> str:
    """Never waits."""
    return f"sync {key}"


def _soft(key: str) -> str:
    """A soft error."""
    raise ToolError(f"no {key}")


def _sick(key: str) -> str:
    """A broken tool."""
    raise RuntimeError(f"broken {key}")


_TOOLS = {"a": _ok, "s": _sync_ok, "e": _soft, "x": _sick}


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from([*_TOOLS, "missing"]), min_size=1, max_size=6))
def test_a_lone_call_answers_as_the_general_pipeline_does(names: list[str]) -> None:
    """``CallPipeline.now`` (nobody listening) gives the model what ``run`` gives it."""

    def transcript(listening: bool) -> tuple[list[Message], str | None]:
        script = [call(name, {"key": str(i)}) for i, name in enumerate(names)] + [reply("end")]
        model = ScriptedModel(script)
        tools = [tool(name=name)(function) for name, function in _TOOLS.items()]
        agent = Agent(model, tools=tools, observers=[_Listener()] if listening else [])
        run = asyncio.run(agent.run("go"))
        return list(model.requests[-1].messages), run.output

    assert transcript(False) == transcript(True)


class _TextLike(TextPart):
    """A text part of a subclass: the general ``Message.text`` reads it."""

    __slots__ = ()


reply_parts = st.lists(
    st.one_of(
        st.builds(TextPart, st.text(max_size=8)),
        st.builds(ThinkingPart, st.text(max_size=8)),
        st.builds(_TextLike, st.text(max_size=8)),
    ),
    max_size=3,
)


@settings(max_examples=150, deadline=None)
@given(reply_parts, usages)
def test_a_recorded_turn_reads_its_reply_as_the_message_reads(
    parts_: list[TextPart], usage: Usage
) -> None:
    """``ModelStep._record``'s one-part reads: the turn's text and thinking, the run's usage."""
    message = Message("assistant", (*parts_, TextPart("end")))
    one = Message("assistant", tuple(parts_[:1]) or (TextPart("x"),))
    runs = []
    for answer in (message, one):
        model = ScriptedModel([ModelResponse(answer, usage=usage)])
        runs.append(asyncio.run(Agent(model).run("go")))
        turn = runs[-1].turns[0]
        assert turn.text == answer.text
        assert turn.thinking == "".join(p.text for p in answer.parts if type(p) is ThinkingPart)
        total = _NO_USAGE + usage  # a run's first usage: its sum
        assert runs[-1].usage == total
        assert dict(runs[-1].usage.provider_tool_calls) == dict(total.provider_tool_calls)


def test_a_run_sums_its_turns_usage_and_its_first_call_gets_a_set_of_ids() -> None:
    script = [call("s", {"key": "1"}, id="c1"), call("s", {"key": "2"}, id="c1"), reply("end")]
    script[-1] = ModelResponse(Message.assistant("end"), usage=Usage(3, 4))
    model = ScriptedModel(script)
    run = asyncio.run(Agent(model, tools=[tool(name="s")(_sync_ok)]).run("go"))
    assert run.usage == sum((t.usage for t in run.turns), Usage())
    ids = [c.id for t in run.turns for c in t.tool_calls]
    assert len(ids) == len(set(ids)) == 2 and ids[0] == "c1"  # the second "c1" restamped


class _CancelAtTurn(Observer):
    """Cancels the session when the second turn starts: that turn's model call never goes."""

    def __init__(self) -> None:
        self.session: Any = None

    def on_event(self, event: Event) -> None:
        if isinstance(event, TurnStarted) and event.turn == 1:
            self.session.cancel()


def test_a_listener_cancelling_at_turn_started_stops_the_call_it_announced() -> None:
    """The checkpoint after ``TurnStarted`` stays where somebody listens (``_plain_request``)."""
    model = ScriptedModel([call("s", {"key": "1"}), reply("never")])
    listener = _CancelAtTurn()
    agent = Agent(model, tools=[tool(name="s")(_sync_ok)], observers=[listener])
    session = listener.session = agent.session()
    with pytest.raises(Cancelled):
        asyncio.run(session.run("go"))
    assert len(model.requests) == 1


def test_a_reply_of_one_call_reads_its_parts_as_its_calls() -> None:
    one = ToolCallPart("c", "t", {})
    message = Message("assistant", (one,))
    assert message.tool_calls == (one,) and message.tool_calls is message.tool_calls
    both = Message("assistant", (TextPart("x"), one, ToolCallPart("d", "t", {})))
    assert [c.id for c in both.tool_calls] == ["c", "d"]
    assert Message("assistant", (TextPart("x"),)).tool_calls == ()


def test_a_client_reports_unless_it_is_an_http_adapter_as_isinstance_says() -> None:
    """``reports`` reads the class's MRO: what ``isinstance(client, HttpClient)`` answers."""
    from agentloop.engine.turn import reports
    from agentloop.providers import AnthropicClient, OpenAIClient
    from agentloop.providers._client import HttpClient
    from agentloop.providers.retrying import RetryingClient

    class Mine(OpenAIClient):
        """An adapter of one's own, made from ours."""

    clients: list[Any] = [
        OpenAIClient("gpt-4o", api_key="sk-test"),
        AnthropicClient("claude-sonnet-4-5", api_key="sk-test"),
        Mine("gpt-4o", api_key="sk-test"),
        ScriptedModel([]),
    ]
    clients.append(RetryingClient(clients[0]))
    for client in clients:
        assert reports(client) is not isinstance(client, HttpClient)


class _GeneralGuard(ContextGuard):
    """A guard that never measures a message itself: the counter (and its cache) decides."""

    __slots__ = ()

    def added(self, message: Message) -> None:
        self._added(message)


@pytest.mark.parametrize("counter", [HeuristicTokenCounter(), RatioTokenCounter(3.6, 5)])
def test_an_appended_message_is_measured_and_checked_as_the_general_path_does(
    counter: RatioTokenCounter,
) -> None:
    """``ContextGuard.added`` measures a one-part message as ``count_message`` counts it."""

    @settings(max_examples=200, deadline=None)
    @given(st.lists(st.tuples(st.sampled_from(_ROLES), st.lists(counted, min_size=1, max_size=2))))
    def check(appended: list[tuple[str, list[object]]]) -> None:
        config = RunConfig(token_counter=counter)
        guards = [g(config, system=None, observers=EventBus(()), hooks=()) for g in _GUARDS]
        for guard in guards:
            guard.start([], ())
        for role, message_parts in appended:
            message = Message(role, tuple(message_parts))  # type: ignore[arg-type]
            failed = [_absorbed(guard, message) for guard in guards]
            assert failed[0] == failed[1]
            assert guards[0].total == guards[1].total
            if failed[0] is not None:
                return
            assert guards[0]._checkpoint() == guards[1]._checkpoint()

    check()


_GUARDS = (ContextGuard, _GeneralGuard)


def _absorbed(guard: ContextGuard, message: Message) -> str | None:
    try:
        guard.added(message)
    except TranscriptError as error:
        return str(error)
    return None


token_counts = st.one_of(
    st.integers(-5, 5),
    st.integers(0, 2 * 10**12),
    st.sampled_from([2**39 - 1, 2**39, 10**12, 10**12 + 1, -(2**40)]),
    st.floats(-1.0, 2e12, allow_nan=False).map(float),
)


@settings(max_examples=400, deadline=None)
@given(st.lists(token_counts, min_size=5, max_size=5))
def test_a_replys_usage_is_accepted_exactly_as_the_full_check_accepts_it(
    counts: list[int],
) -> None:
    """``checked_reply``'s quick bound decides what ``_usage_checked`` decides."""
    from agentloop.engine.turn import _usage_checked, checked_reply
    from agentloop.errors import ResponseInvalid

    client = ScriptedModel([])
    response = ModelResponse(Message.assistant("x"), usage=Usage(*counts))

    def decided(check: Any) -> object:
        try:
            return check()
        except ResponseInvalid as error:
            return str(error)

    quick = decided(lambda: checked_reply(response, client, None, None))  # type: ignore[arg-type]
    full = decided(lambda: _usage_checked(response, client))
    assert quick == full


class _OtherCounter(HeuristicTokenCounter):
    """The default counter's numbers under another type: the guard's general start measures."""

    __slots__ = ()


def _started(guard: ContextGuard, transcript: list[Message], known: Any = None) -> str | None:
    try:
        guard.start(transcript, (), known)
    except TranscriptError as error:
        return str(error)
    return None


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(_ROLES), st.lists(counted, min_size=1, max_size=2))),
    st.integers(0, 4),
)
def test_a_run_starts_measured_as_the_general_start_measures(
    shapes: list[tuple[str, list[object]]], cut: int
) -> None:
    """``ContextGuard.start`` with the ratio counters: each message as ``added`` takes it."""
    from agentloop.engine.state import NO_CALL_IDS

    transcript = [Message(role, tuple(p)) for role, p in shapes]  # type: ignore[arg-type]
    history = transcript[:cut]
    guards, knowns = [], []
    for counter in (HeuristicTokenCounter(), _OtherCounter()):
        config = RunConfig(token_counter=counter)
        first = ContextGuard(config, system=None, observers=EventBus(()), hooks=())
        known = None
        if _started(first, history) is None:
            known = first.measure_of(history, NO_CALL_IDS)
        guard = ContextGuard(config, system=None, observers=EventBus(()), hooks=())
        guards.append((guard, _started(guard, transcript, known)))
        knowns.append(known is None)
    (fast, failed), (general, expected) = guards
    assert knowns[0] == knowns[1]
    assert failed == expected  # refused at the same message, in the same words
    if failed is None:  # (a refused start ends the run: its total is never read, and
        assert fast.total == general.total  # ``commit_run`` keeps no measure of a failed run)
        assert fast._checkpoint() == general._checkpoint()
