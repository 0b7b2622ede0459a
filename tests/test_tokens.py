"""Token counters, the request estimate and the running meter."""

from __future__ import annotations

import gc
import importlib
import json
import math
import weakref
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentloop.errors import ConfigurationError
from agentloop.messages import Message, ToolCallPart, ToolResultPart
from agentloop.model import ToolSpec
from agentloop.tokens import (
    ContextMeter,
    HeuristicTokenCounter,
    RatioTokenCounter,
    TiktokenCounter,
    TokenCounter,
    arguments_chars,
    arguments_json,
    estimate_request,
    request_overhead,
)


class SpyCounter(HeuristicTokenCounter):
    """Counts how often the real work runs."""

    def __init__(self) -> None:
        super().__init__()
        self.message_work = 0
        self.text_calls = 0

    def _count(self, message: Message) -> int:
        self.message_work += 1
        return super()._count(message)

    def count_text(self, text: str) -> int:
        self.text_calls += 1
        return super().count_text(text)


SPEC = ToolSpec("read_file", "Read a file.", {"type": "object", "properties": {}})


# --------------------------------------------------------------------------- heuristic


def test_text_is_the_ceiling_of_characters_over_four() -> None:
    counter = HeuristicTokenCounter()
    assert counter.count_text("") == 0
    assert counter.count_text("abcd") == 1
    assert counter.count_text("abcde") == 2


def test_a_message_adds_four_framing_tokens() -> None:
    counter = HeuristicTokenCounter()
    assert counter.count_message(Message.user("a" * 40)) == 10 + 4
    assert counter.count_message(Message.user("a" * 41)) == 11 + 4


def test_the_count_is_cached_on_the_message() -> None:
    counter = SpyCounter()
    message = Message.user("hello there")
    first = counter.count_message(message)
    assert counter.count_message(message) == first
    assert counter.message_work == 1


def test_counters_with_different_ratios_do_not_share_a_cache_entry() -> None:
    message = Message.user("a" * 100)
    assert HeuristicTokenCounter().count_message(message) == 25 + 4
    assert RatioTokenCounter(2.0, 0).count_message(message) == 50


def test_tool_arguments_are_measured_as_json_not_repr() -> None:
    counter = RatioTokenCounter(1.0, 0)
    call = ToolCallPart("c1", "read", {"path": "é", "n": None, "flag": True})
    # {"path":"é","n":null,"flag":true} -> 33 characters; repr would be 39
    assert counter.count_message(Message.assistant(calls=[call])) == 2 + 4 + 33


def test_arguments_that_json_cannot_encode_are_still_counted() -> None:
    counter = RatioTokenCounter(1.0, 0)
    call = ToolCallPart("c", "t", {"value": object()})
    assert counter.count_message(Message.assistant(calls=[call])) > 10


_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(), _JSON_VALUES, max_size=5))
def test_arguments_json_is_json_dumps_compact(arguments: dict[str, Any]) -> None:
    expected = json.dumps(arguments, ensure_ascii=False, separators=(",", ":"), default=str)
    assert arguments_json(arguments) == expected


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(st.text(), st.text(), max_size=4)
    | st.dictionaries(st.text(), _JSON_VALUES, max_size=4)
)
def test_arguments_chars_is_the_length_of_arguments_json(arguments: dict[str, Any]) -> None:
    arguments_json({})  # the encoders are built: the flat path is taken
    assert arguments_chars(arguments) == len(arguments_json(arguments))


def test_arguments_json_of_a_circular_value_fails_as_json_dumps_does() -> None:
    looped: dict[str, Any] = {}
    looped["again"] = looped
    with pytest.raises(ValueError, match="Circular reference"):
        arguments_json({"d": looped})
    assert arguments_json({"d": object}) == json.dumps({"d": str(object)}, separators=(",", ":"))


def test_tool_results_count_their_content_name_and_id() -> None:
    counter = RatioTokenCounter(1.0, 0)
    part = ToolResultPart("c1", "read", "0123456789", is_error=True)
    assert counter.count_message(Message.tool_results([part])) == 2 + 4 + 10


def test_counters_satisfy_the_protocol() -> None:
    assert isinstance(HeuristicTokenCounter(), TokenCounter)
    assert isinstance(RatioTokenCounter.for_provider("openai"), TokenCounter)


def test_equality_hash_and_repr() -> None:
    assert HeuristicTokenCounter() == HeuristicTokenCounter(4.0, 4)
    assert hash(HeuristicTokenCounter()) == hash(HeuristicTokenCounter(4.0, 4))
    assert HeuristicTokenCounter() != RatioTokenCounter(4.0, 4)
    assert HeuristicTokenCounter() != HeuristicTokenCounter(4.0, 5)
    assert repr(RatioTokenCounter(3.6, 5)) == "RatioTokenCounter(3.6, 5)"


# --------------------------------------------------------------------------- ratio presets


@pytest.mark.parametrize(
    ("provider", "ratio", "per_message"),
    [
        ("openai", 4.30, 4),
        ("anthropic", 3.60, 5),
        ("gemini", 4.05, 4),
        ("local", 3.80, 4),
        ("openrouter", 4.30, 4),
        ("ollama", 3.80, 4),
    ],
)
def test_provider_presets(provider: str, ratio: float, per_message: int) -> None:
    counter = RatioTokenCounter.for_provider(provider)
    assert (counter.chars_per_token, counter.per_message) == (ratio, per_message)


def test_the_anthropic_preset_counts_more_tokens_than_openai() -> None:
    text = "x" * 4300
    assert RatioTokenCounter.for_provider("openai").count_text(text) == 1000
    assert RatioTokenCounter.for_provider("anthropic").count_text(text) == math.ceil(4300 / 3.6)


def test_an_unknown_provider_has_no_preset() -> None:
    with pytest.raises(ConfigurationError, match="known: anthropic, gemini") as info:
        RatioTokenCounter.for_provider("mystery")
    assert info.value.field == "provider"


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf"), 0, 0.0, -1.5])
def test_a_bad_ratio_warns_and_falls_back_to_four(bad: float) -> None:
    with pytest.warns(RuntimeWarning, match="using 4.0"):
        counter = RatioTokenCounter(bad, 4)
    assert counter.chars_per_token == 4.0
    assert counter.count_text("abcdefgh") == 2


def test_the_heuristic_counter_also_guards_its_ratio() -> None:
    with pytest.warns(RuntimeWarning):
        assert HeuristicTokenCounter(float("nan")).chars_per_token == 4.0


def test_the_smallest_positive_ratio_is_accepted() -> None:
    assert RatioTokenCounter(0.5, 0).count_text("ab") == 4


@pytest.mark.parametrize("bad", ["4", None, True])
def test_a_non_numeric_ratio_is_a_configuration_error(bad: object) -> None:
    with pytest.raises(ConfigurationError):
        RatioTokenCounter(bad, 4)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [-1, 1.5, True])
def test_per_message_must_be_a_non_negative_int(bad: object) -> None:
    with pytest.raises(ConfigurationError) as info:
        RatioTokenCounter(4.0, bad)  # type: ignore[arg-type]
    assert info.value.field == "per_message"


def test_zero_per_message_is_allowed() -> None:
    assert RatioTokenCounter(4.0, 0).count_message(Message.user("abcd")) == 1


# --------------------------------------------------------------------------- tiktoken


def test_tiktoken_counter_without_tiktoken_is_a_configuration_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = importlib.import_module

    def fake_import(name: str, package: str | None = None) -> ModuleType:
        if name == "tiktoken":
            raise ImportError("No module named 'tiktoken'")
        return real(name, package)

    monkeypatch.setattr(importlib, "import_module", fake_import)
    with pytest.raises(ConfigurationError, match="tiktoken") as info:
        TiktokenCounter()
    assert isinstance(info.value.__cause__, ImportError)


@pytest.mark.skipif(not TiktokenCounter.available(), reason="tiktoken is not installed")
def test_tiktoken_counts_exactly() -> None:
    counter = TiktokenCounter("cl100k_base", per_message=3)
    assert counter.count_text("hello world") == 2
    assert counter.count_text("<|endoftext|>") > 1  # special tokens count as text
    message = Message.user("hello world")
    assert counter.count_message(message) == 2 + 3
    assert isinstance(counter, TokenCounter)


@pytest.mark.skipif(not TiktokenCounter.available(), reason="tiktoken is not installed")
def test_tiktoken_rejects_an_unknown_encoding() -> None:
    with pytest.raises(ConfigurationError):
        TiktokenCounter("no-such-encoding")


# --------------------------------------------------------------------------- request estimate


def test_an_empty_request_costs_nothing() -> None:
    assert estimate_request([], system=None, tools=(), counter=HeuristicTokenCounter()) == 0


def test_the_estimate_covers_messages_system_prompt_and_tool_schemas() -> None:
    counter = HeuristicTokenCounter()
    messages = [Message.user("a" * 400)]
    bare = estimate_request(messages, system=None, tools=(), counter=counter)
    with_system = estimate_request(messages, system="s" * 400, tools=(), counter=counter)
    with_all = estimate_request(messages, system="s" * 400, tools=[SPEC], counter=counter)
    assert bare == 104
    assert with_system == bare + 104
    assert with_all > with_system
    assert with_all - with_system == request_overhead(None, [SPEC], counter)


def test_the_overhead_is_measured_once_per_system_and_tools() -> None:
    counter = SpyCounter()
    tools = [SPEC, ToolSpec("grep", "Search.", {"type": "object"})]
    first = request_overhead("be careful", tools, counter)
    calls = counter.text_calls
    assert request_overhead("be careful", list(tools), counter) == first  # same specs, new list
    assert counter.text_calls == calls
    request_overhead("be brief", tools, counter)
    assert counter.text_calls > calls  # a different system prompt is measured


class FixedCounter:
    """Every message and every text costs ``n`` tokens (weakly referenceable, like most)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.text_calls = 0

    def count_message(self, message: Message) -> int:
        return self.n

    def count_text(self, text: str) -> int:
        self.text_calls += 1
        return self.n


class SlottedCounter:
    """A user's counter that cannot be weakly referenced."""

    __slots__ = ("n", "text_calls")

    def __init__(self, n: int) -> None:
        self.n = n
        self.text_calls = 0

    def count_message(self, message: Message) -> int:
        return self.n

    def count_text(self, text: str) -> int:
        self.text_calls += 1
        return self.n


@pytest.mark.parametrize("make", [lambda: FixedCounter(3), HeuristicTokenCounter])
def test_the_overhead_cache_does_not_keep_a_counter_alive(
    make: Callable[[], TokenCounter],
) -> None:
    counter = make()
    request_overhead("be careful", [SPEC], counter)
    ref = weakref.ref(counter)
    del counter
    gc.collect()
    assert ref() is None


def test_a_new_counter_never_reads_a_dead_counters_overhead() -> None:
    """Bug pin: ids are reused after collection; a cache keyed by ``id`` alone lies."""
    tools = [SPEC]
    for n in range(1, 41):  # CPython hands a freed id to the next object of its size
        counter = FixedCounter(n)
        assert request_overhead(None, tools, counter) == n
        del counter


def test_a_counter_that_cannot_be_weakly_referenced_is_still_cached() -> None:
    counter = SlottedCounter(7)
    assert request_overhead("s", [SPEC], counter) == 14
    calls = counter.text_calls
    assert request_overhead("s", [SPEC], counter) == 14
    assert counter.text_calls == calls


def test_an_estimate_does_not_recount_cached_messages() -> None:
    counter = SpyCounter()
    history = [Message.user(f"message {i}") for i in range(100)]
    estimate_request(history, system="x", tools=[SPEC], counter=counter)
    work = counter.message_work
    estimate_request(history, system="x", tools=[SPEC], counter=counter)
    assert counter.message_work == work


# --------------------------------------------------------------------------- meter


def test_the_meter_matches_the_full_estimate() -> None:
    counter = HeuristicTokenCounter()
    history = [Message.user("hello" * 20), Message.assistant("hi" * 30)]
    meter = ContextMeter(counter)
    meter.reset(history, "system", [SPEC])
    assert meter.total == estimate_request(history, system="system", tools=[SPEC], counter=counter)
    assert meter.overhead == request_overhead("system", [SPEC], counter)
    assert meter.messages_tokens == meter.total - meter.overhead


def test_the_estimate_is_not_zero_at_run_start() -> None:
    """Bug pin: an estimate of zero at run start let an over-window history through."""
    meter = ContextMeter(HeuristicTokenCounter())
    meter.reset([Message.user("x" * 40_000)], "sys", [SPEC])
    assert meter.total > 10_000


def test_tool_outputs_count_as_soon_as_they_are_added() -> None:
    """Bug pin: tool outputs were not counted until after the next request."""
    counter = HeuristicTokenCounter()
    meter = ContextMeter(counter)
    meter.reset([Message.user("read it")])
    before = meter.total
    call = ToolCallPart("c1", "read_file", {"path": "big.txt"})
    meter.add(Message.assistant(calls=[call]))
    added = meter.add(Message.tool_results([ToolResultPart("c1", "read_file", "z" * 8_000)]))
    assert added >= 2_000
    assert meter.total >= before + 2_000


def test_adding_a_message_counts_only_that_message() -> None:
    counter = SpyCounter()
    meter = ContextMeter(counter)
    meter.reset([Message.user(f"m{i}") for i in range(1_000)])
    work = counter.message_work
    meter.add(Message.assistant("new"))
    meter.extend([Message.user("a"), Message.assistant("b")])
    assert counter.message_work == work + 3


def test_replace_keeps_the_overhead_and_remeasures_messages() -> None:
    counter = HeuristicTokenCounter()
    meter = ContextMeter(counter)
    meter.reset([Message.user("x" * 4_000)], "system prompt", [SPEC])
    overhead = meter.overhead
    meter.replace([Message.user("short")])
    assert meter.overhead == overhead
    assert meter.total == overhead + counter.count_message(Message.user("short"))
    assert "ContextMeter(total=" in repr(meter)
