"""Window policy lines and the two compactors (pair safety, never empty, the summariser budget)."""

from __future__ import annotations

import importlib.util
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentloop.context import (
    SUMMARY_PREFIX,
    Compactor,
    SummarizingCompactor,
    TruncatingCompactor,
    WindowPolicy,
)
from agentloop.errors import ConfigurationError, ResponseInvalid
from agentloop.messages import Message, ToolCallPart, ToolResultPart
from agentloop.model import ModelClient, ModelRequest, ModelResponse, StreamEvent
from agentloop.tokens import HeuristicTokenCounter, estimate_request
from agentloop.transcript import validate_transcript


def _load_strategies() -> ModuleType:
    """The transcript strategy lives in test_transcript.py (tests are not a package)."""
    path = Path(__file__).with_name("test_transcript.py")
    spec = importlib.util.spec_from_file_location("_transcript_strategies", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


transcripts = _load_strategies().transcripts

COUNTER = HeuristicTokenCounter()


def user(text: str = "hi") -> Message:
    return Message.user(text)


def calls(*ids: str) -> Message:
    return Message.assistant("", [ToolCallPart(i, "read_file", {"path": i}) for i in ids])


def results(*ids: str, content: str = "") -> Message:
    return Message.tool_results(
        [ToolResultPart(i, "read_file", content or f"content of {i}") for i in ids]
    )


def reply(text: str = "done") -> Message:
    return Message.assistant(text)


def conversation(turns: int, *, size: int = 10) -> list[Message]:
    """A user message, then ``turns`` tool round trips, then a reply."""
    messages = [user("task")]
    for i in range(turns):
        messages += [calls(f"c{i}"), results(f"c{i}", content="x" * size)]
    return [*messages, reply()]


def truncate(messages: Sequence[Message], **kwargs: int) -> list[Message]:
    return TruncatingCompactor(**kwargs).truncate(messages)


# --------------------------------------------------------------------------- window policy


def test_the_worked_example_window_8000_threshold_80() -> None:
    policy = WindowPolicy(8_000, 0.8, True)
    assert policy.need(5_500) is None
    assert policy.need(6_400) is None  # exactly at the line: strict
    assert policy.need(6_401) == "threshold"  # one past
    assert policy.need(7_599) == "threshold"
    assert policy.need(7_600) == "emergency"  # exactly 95 %: inclusive
    assert policy.need(7_700) == "emergency"


def test_the_emergency_line_ignores_auto_compact_off() -> None:
    policy = WindowPolicy(8_000, 0.8, auto_compact=False)
    assert policy.need(6_401) is None
    assert policy.need(7_599) is None
    assert policy.need(7_600) == "emergency"


def test_a_zero_window_disables_the_window_policy() -> None:
    policy = WindowPolicy(0, 0.8, True)
    assert policy.need(10**12) is None
    assert policy.fits(10**12)
    assert not policy.enabled


def test_the_defaults_and_the_target() -> None:
    policy = WindowPolicy()
    assert (policy.window, policy.threshold, policy.auto_compact) == (200_000, 0.8, True)
    assert policy.threshold_tokens == 160_000
    assert policy.emergency_tokens == 190_000
    assert policy.target == 112_000
    assert policy.need(160_000) is None and policy.need(160_001) == "threshold"
    assert policy.need(189_999) == "threshold" and policy.need(190_000) == "emergency"


def test_the_target_of_the_8000_window() -> None:
    assert WindowPolicy(8_000, 0.8, True).target == 4_480


def test_fits_is_inclusive_of_the_window() -> None:
    policy = WindowPolicy(8_000, 0.8, True)
    assert policy.fits(8_000)
    assert not policy.fits(8_001)


def test_lines_use_the_decimal_written_not_the_binary_float() -> None:
    # 0.7 as a binary float is 0.69999...; 10 x 0.7 must still be a line at exactly 7.
    policy = WindowPolicy(10, 0.7, True)
    assert policy.threshold_tokens == 7
    assert policy.need(7) is None
    assert policy.need(8) == "threshold"
    # 0.29 x 100 is 28.999999999999996 in floats.
    assert WindowPolicy(100, 0.29, True).threshold_tokens == 29


def test_a_fractional_emergency_line_rounds_up() -> None:
    policy = WindowPolicy(7, 0.5, True)  # 95 % of 7 is 6.65
    assert policy.emergency_tokens == 7
    assert policy.need(6) == "threshold"
    assert policy.need(7) == "emergency"


def test_a_fractional_threshold_line_rounds_down() -> None:
    policy = WindowPolicy(9, 0.5, True)  # the line is 4.5: 4 is under, 5 is over
    assert policy.need(4) is None
    assert policy.need(5) == "threshold"


def test_a_zero_threshold_disables_only_the_threshold_line() -> None:
    policy = WindowPolicy(8_000, 0.0, True)
    assert policy.need(7_599) is None
    assert policy.need(7_600) == "emergency"
    assert policy.target == 5_600  # 70 % of the window when there is no threshold line


def test_a_full_threshold_leaves_the_emergency_line_first() -> None:
    policy = WindowPolicy(8_000, 1.0, True)
    assert policy.need(7_599) is None
    assert policy.need(7_600) == "emergency"


@pytest.mark.parametrize(
    ("window", "threshold", "field"),
    [
        (-1, 0.8, "window"),
        (True, 0.8, "window"),
        (1.5, 0.8, "window"),
        (8_000, 1.01, "threshold"),
        (8_000, -0.1, "threshold"),
        (8_000, float("nan"), "threshold"),
        (8_000, "0.8", "threshold"),
    ],
)
def test_invalid_policies_are_configuration_errors(
    window: object, threshold: object, field: str
) -> None:
    with pytest.raises(ConfigurationError) as info:
        WindowPolicy(window, threshold, True)  # type: ignore[arg-type]
    assert info.value.field == field


def test_policies_compare_by_value() -> None:
    assert WindowPolicy(8_000, 0.8, True) == WindowPolicy(8_000, 0.8, True)
    assert WindowPolicy(8_000, 0.8, True) != WindowPolicy(8_000, 0.8, False)


# --------------------------------------------------------------------------- truncating


def test_truncating_is_a_compactor_with_the_spec_defaults() -> None:
    compactor = TruncatingCompactor()
    assert isinstance(compactor, Compactor)
    assert (compactor.preserve_recent, compactor.min_messages) == (4, 6)


@pytest.mark.parametrize(("preserve", "minimum"), [(0, 6), (4, 1)])
def test_truncating_rejects_sizes_below_the_minimums(preserve: int, minimum: int) -> None:
    with pytest.raises(ConfigurationError):
        TruncatingCompactor(preserve, minimum)


def test_the_smallest_sizes_are_allowed() -> None:
    messages = [user("a"), reply("b"), user("c")]
    assert truncate(messages, preserve_recent=1, min_messages=2) == [messages[0], messages[2]]


def test_a_conversation_at_min_messages_passes_through_unchanged() -> None:
    messages = [user("1"), reply("2"), user("3"), reply("4"), user("5"), reply("6")]
    out = truncate(messages)
    assert out == messages and out is not messages


def test_one_message_past_min_messages_is_truncated() -> None:
    messages = [user("1"), reply("2"), user("3"), reply("4"), user("5"), reply("6"), user("7")]
    assert truncate(messages) == [messages[0], *messages[3:]]


def test_the_first_message_and_the_tail_are_the_same_objects() -> None:
    messages = conversation(10)
    out = truncate(messages)
    assert out[0] is messages[0]
    # the last 4 start with results: the tail reaches back to their calls
    assert all(a is b for a, b in zip(out[1:], messages[-5:], strict=True))


def test_the_tail_never_starts_with_orphaned_results() -> None:
    messages = conversation(5)  # ..., calls c4, results c4, reply: the 4th-last is results c3
    out = truncate(messages)
    assert out[1].role == "assistant" and out[1].tool_calls[0].id == "c3"
    validate_transcript(out)


def test_the_most_recent_turn_survives_a_preserve_recent_of_one() -> None:
    messages = conversation(5)[:-1]  # ends with the results of c4
    out = truncate(messages, preserve_recent=1)
    assert out == [messages[0], messages[-2], messages[-1]]
    validate_transcript(out)


async def test_compact_ignores_the_target() -> None:
    messages = conversation(10)
    out = await TruncatingCompactor().compact(messages, target_tokens=1, counter=COUNTER)
    assert out == truncate(messages)


async def test_a_no_op_pass_reports_the_real_size() -> None:
    """Bug pin: a no-op compaction reported 0 tokens and blinded the no-progress guard."""
    messages = [user("x" * 4_000), reply("y" * 4_000)]
    out = await TruncatingCompactor().compact(messages, target_tokens=10, counter=COUNTER)
    before = estimate_request(messages, system=None, tools=(), counter=COUNTER)
    after = estimate_request(out, system=None, tools=(), counter=COUNTER)
    assert after == before > 2_000


def test_compaction_never_returns_an_empty_list() -> None:
    """Bug pin: compaction returned empty lists."""
    orphans = [user("task")] + [results(f"x{i}") for i in range(10)]
    assert truncate(orphans) == orphans  # nothing safe to cut: unchanged, never empty
    assert truncate([user()]) == [user()]
    assert truncate([]) == []


def test_results_orphaned_by_the_cut_are_dropped_not_sent() -> None:
    """Bug pin: compaction orphaned tool results."""
    messages = [user("task"), *[reply(f"r{i}") for i in range(6)], results("ghost"), reply()]
    out = truncate(messages, preserve_recent=3)
    assert all(m.role != "tool" for m in out)
    assert out[0] is messages[0] and out[-1] is messages[-1]


def test_a_stray_result_in_a_kept_tool_message_is_removed() -> None:
    stray = Message.tool_results(
        [ToolResultPart("c9", "read_file", "ok"), ToolResultPart("ghost", "read_file", "?")]
    )
    messages = [*conversation(4)[:-1], calls("c9"), stray, reply()]
    out = truncate(messages)
    assert [p.call_id for p in out[-2].tool_results_parts] == ["c9"]
    validate_transcript(out)


def test_reused_call_ids_pair_per_occurrence() -> None:
    """Bug pin: call-id reuse conflated pairs."""
    messages = [user("task")]
    for i in range(4):
        messages += [calls("call_0"), results("call_0", content=f"result {i}")]
    out = truncate(messages, preserve_recent=2)
    assert out == [messages[0], messages[-2], messages[-1]]
    assert out[-1].tool_results_parts[0].content == "result 3"
    validate_transcript(out, unique_ids=False)


def test_a_result_never_pairs_with_an_older_call_of_the_same_id() -> None:
    old = [user("task"), calls("call_0"), results("call_0"), reply("a"), user("b"), reply("c")]
    messages = [*old, results("call_0", content="late"), reply("d"), user("e")]
    out = truncate(messages, preserve_recent=3)
    assert all(m.role != "tool" for m in out)


def test_a_tool_call_in_the_first_message_keeps_its_results() -> None:
    """Bug pin: a tool call in the first message was orphaned."""
    messages = [calls("first"), results("first"), *conversation(6)[1:]]
    out = truncate(messages)
    assert out[0] is messages[0] and out[1] is messages[1]
    assert out[2:] == messages[-5:]


def test_a_lone_call_outside_the_cut_is_kept() -> None:
    messages = [*conversation(5)[:-1], calls("pending")]
    out = truncate(messages, preserve_recent=2)
    assert out[-1] is messages[-1]
    validate_transcript(out, allow_pending=True)


# --------------------------------------------------------------------------- properties

_FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _last_turn_start(messages: Sequence[Message]) -> int:
    last = len(messages) - 1
    return last - 1 if messages[last].role == "tool" else last


@_FAST
@given(transcripts(), st.integers(1, 6), st.integers(2, 8))
def test_truncation_keeps_every_promise(
    messages: list[Message], preserve: int, minimum: int
) -> None:
    out = truncate(messages, preserve_recent=preserve, min_messages=minimum)
    validate_transcript(out)
    assert out, "never empty"
    assert len(out) <= len(messages), "never longer"
    assert out[0] is messages[0], "keeps the first message"
    start = _last_turn_start(messages)
    assert out[-(len(messages) - start) :] == messages[start:], "keeps the most recent turn"
    if len(messages) > minimum and len(out) < len(messages):
        assert out[-preserve:] == messages[-preserve:], "keeps the requested tail"
    assert sum(map(COUNTER.count_message, out)) <= sum(map(COUNTER.count_message, messages))


@_FAST
@given(transcripts(reuse_ids=True), st.integers(1, 6))
def test_truncation_with_reused_ids_stays_valid(messages: list[Message], preserve: int) -> None:
    out = truncate(messages, preserve_recent=preserve, min_messages=2)
    validate_transcript(out, unique_ids=False)
    assert out[0] is messages[0]


# --------------------------------------------------------------------------- summarizing


class SummaryModel:
    """A ``ModelClient`` that answers every request with ``answer(request)``."""

    def __init__(self, answer: Callable[[ModelRequest], str] | str | BaseException) -> None:
        self._answer = answer
        self.requests: list[ModelRequest] = []

    @property
    def model(self) -> str:
        return "summary-model"

    @property
    def provider(self) -> str:
        return "scripted"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        if isinstance(self._answer, BaseException):
            raise self._answer
        text = self._answer if isinstance(self._answer, str) else self._answer(request)
        return ModelResponse(Message.assistant(text), model=self.model)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        yield StreamEvent("done", response=await self.complete(request))

    async def aclose(self) -> None:
        return None


def test_the_summary_model_double_is_a_model_client() -> None:
    assert isinstance(SummaryModel("x"), ModelClient)


async def test_the_middle_becomes_one_summary_message_after_the_first() -> None:
    model = SummaryModel("the agent read c0..c5")
    compactor = SummarizingCompactor(model)
    assert isinstance(compactor, Compactor)
    messages = conversation(8, size=400)
    out = await compactor.compact(messages, target_tokens=4_000, counter=COUNTER)
    assert out[0] is messages[0]
    assert out[1] == Message.user(SUMMARY_PREFIX + "the agent read c0..c5")
    assert out[2:] == messages[-5:]
    validate_transcript(out)
    assert len(out) <= len(messages)


async def test_the_summary_request_is_plain_and_bounded() -> None:
    model = SummaryModel("summary")
    compactor = SummarizingCompactor(model, max_summary_tokens=200)
    await compactor.compact(conversation(8, size=400), target_tokens=4_000, counter=COUNTER)
    (request,) = model.requests
    assert request.tools == ()
    assert request.system == compactor.instructions
    assert request.settings.max_tokens == 200
    assert "Tool result from read_file: xxxx" in request.messages[0].text
    assert 'Assistant called read_file({"path":"c0"})' in request.messages[0].text


async def test_a_short_conversation_sends_no_request() -> None:
    model = SummaryModel("unused")
    messages = conversation(2)
    out = await SummarizingCompactor(model).compact(messages, target_tokens=10, counter=COUNTER)
    assert out == messages and model.requests == []


async def test_the_summariser_never_sends_a_request_over_its_budget() -> None:
    model = SummaryModel("short summary")
    compactor = SummarizingCompactor(model, max_summary_tokens=100)
    messages = conversation(200, size=2_000)  # about 100k tokens in the middle
    out = await compactor.compact(messages, target_tokens=3_000, counter=COUNTER)
    (request,) = model.requests
    size = estimate_request(request.messages, system=request.system, tools=(), counter=COUNTER)
    assert size + 100 <= 3_000
    assert "earlier messages omitted]" in request.messages[0].text
    assert '"path":"c197"' in request.messages[0].text  # the newest part of the middle is kept
    assert '"path":"c0"' not in request.messages[0].text
    validate_transcript(out)


async def test_an_explicit_request_budget_wins_over_the_target() -> None:
    model = SummaryModel("s")
    compactor = SummarizingCompactor(model, max_summary_tokens=50, max_request_tokens=600)
    await compactor.compact(conversation(50, size=400), target_tokens=100_000, counter=COUNTER)
    request = model.requests[0]
    size = estimate_request(request.messages, system=request.system, tools=(), counter=COUNTER)
    assert size + 50 <= 600


async def test_one_huge_message_is_clipped_to_the_budget() -> None:
    model = SummaryModel("s")
    messages = [user("task"), reply("a"), reply("a" * 100_000), *conversation(2)[1:]]
    compactor = SummarizingCompactor(model, max_summary_tokens=100)
    await compactor.compact(messages, target_tokens=1_000, counter=COUNTER)
    request = model.requests[0]
    size = estimate_request(request.messages, system=request.system, tools=(), counter=COUNTER)
    assert size + 100 <= 1_000
    assert "[...truncated]" in request.messages[0].text


async def test_no_room_for_a_request_falls_back_to_truncation() -> None:
    model = SummaryModel("unused")
    messages = conversation(8, size=400)
    compactor = SummarizingCompactor(model, max_summary_tokens=1_024)
    out = await compactor.compact(messages, target_tokens=1_000, counter=COUNTER)
    assert model.requests == []
    assert out == truncate(messages)


async def test_a_summary_bigger_than_the_middle_falls_back_to_truncation() -> None:
    model = SummaryModel("word " * 500)
    messages = [user("task"), *[reply(f"r{i}") for i in range(8)]]
    out = await SummarizingCompactor(model).compact(messages, target_tokens=50_000, counter=COUNTER)
    assert len(model.requests) == 1
    assert out == truncate(messages)


async def test_a_long_summary_is_clipped_to_max_summary_tokens() -> None:
    model = SummaryModel("z" * 10_000)
    compactor = SummarizingCompactor(model, max_summary_tokens=100)
    messages = conversation(40, size=4_000)
    out = await compactor.compact(messages, target_tokens=50_000, counter=COUNTER)
    summary = out[1].text.removeprefix(SUMMARY_PREFIX)
    assert COUNTER.count_text(summary) <= 100
    assert summary.endswith("[...truncated]")


async def test_a_failing_summariser_raises() -> None:
    model = SummaryModel(RuntimeError("model down"))
    with pytest.raises(RuntimeError, match="model down"):
        await SummarizingCompactor(model).compact(
            conversation(8), target_tokens=50_000, counter=COUNTER
        )


async def test_an_empty_summary_is_an_invalid_response() -> None:
    model = SummaryModel("   ")
    with pytest.raises(ResponseInvalid, match="empty summary") as info:
        await SummarizingCompactor(model).compact(
            conversation(8), target_tokens=50_000, counter=COUNTER
        )
    assert info.value.provider == "scripted"


def test_summarizing_validates_its_sizes() -> None:
    model = SummaryModel("x")
    with pytest.raises(ConfigurationError):
        SummarizingCompactor(model, preserve_recent=0)
    with pytest.raises(ConfigurationError):
        SummarizingCompactor(model, min_messages=1)
    with pytest.raises(ConfigurationError):
        SummarizingCompactor(model, max_summary_tokens=0)


async def test_the_summary_keeps_a_first_message_tool_call_paired() -> None:
    model = SummaryModel("s")
    messages = [calls("first"), results("first", content="y" * 800), *conversation(6)[1:]]
    out = await SummarizingCompactor(model).compact(messages, target_tokens=9_000, counter=COUNTER)
    assert out[:2] == messages[:2]
    assert out[2].text.startswith(SUMMARY_PREFIX)
