"""Messages are frozen and round-trip losslessly."""

import dataclasses
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentloop.errors import InvalidInput
from agentloop.messages import Message, Part, Role, TextPart, ToolCallPart, ToolResultPart, Usage

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3)
    ),
    max_leaves=6,
)
parts = st.one_of(
    st.builds(TextPart, st.text(max_size=20)),
    st.builds(
        ToolCallPart,
        st.text(min_size=1, max_size=5),
        st.text(min_size=1, max_size=5),
        st.dictionaries(st.text(max_size=4), json_values, max_size=3),
    ),
    st.builds(
        ToolResultPart,
        st.text(min_size=1, max_size=5),
        st.text(max_size=5),
        st.text(max_size=20),
        st.booleans(),
    ),
)


ROLES: list[Role] = ["system", "user", "assistant", "tool"]


@given(st.sampled_from(ROLES), st.lists(parts, max_size=4))
def test_round_trip(role: Role, items: list[Part]) -> None:
    message = Message(role, tuple(items))
    assert Message.from_dict(message.to_dict()) == message


def test_frozen_and_parts_become_a_tuple() -> None:
    message = Message("user", [TextPart("hi")])  # type: ignore[arg-type]
    assert isinstance(message.parts, tuple)
    with pytest.raises(dataclasses.FrozenInstanceError):
        message.role = "assistant"  # type: ignore[misc]


def test_bad_role_is_invalid_input() -> None:
    with pytest.raises(InvalidInput):
        Message("robot", ())  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        Message.from_dict({"role": "user", "parts": [{"type": "image"}]})


def test_helpers() -> None:
    call = ToolCallPart("c1", "read", {"p": 1})
    message = Message.assistant("thinking", [call])
    assert message.text == "thinking" and message.tool_calls == (call,)
    results = Message.tool_results([ToolResultPart("c1", "read", "ok")])
    assert results.role == "tool" and results.tool_results_parts[0].content == "ok"
    assert Message.system("s").role == "system"


def test_encoded_is_computed_once() -> None:
    message = Message.user("hello")
    calls: list[int] = []

    def encode(m: Message) -> dict[str, Any]:
        calls.append(1)
        return {"role": m.role}

    assert message.encoded("k", encode) == {"role": "user"}
    assert message.encoded("k", encode) == {"role": "user"}
    assert calls == [1]
    assert message == Message.user("hello")


def test_usage_adds() -> None:
    total = Usage(1, 2) + Usage(3, 4)
    assert (total.input_tokens, total.output_tokens, total.total_tokens) == (4, 6, 10)
    assert Usage.from_dict(total.to_dict()) == total


class _Text(str):
    """A ``str`` subclass: ``Message.from_input`` takes its general path."""


@given(st.text(max_size=40))
def test_from_input_takes_a_plain_str_as_its_general_path_does(text: str) -> None:
    fast, general = Message.from_input(text), Message.from_input(_Text(text))
    assert fast == general == Message("user", (TextPart(text),))
    assert type(fast.text) is str and fast.parts == general.parts
    assert Message.from_input([text]) == fast


_SOME_PARTS = st.lists(
    st.sampled_from(
        [TextPart("a"), ToolCallPart("c1", "f", {}), ToolResultPart("c1", "f", "r"), TextPart("")]
    ),
    max_size=4,
)


@given(_SOME_PARTS)
def test_tool_calls_are_the_call_parts_in_order(parts: list[Part]) -> None:
    message = Message("assistant", tuple(parts))
    expected = tuple(p for p in parts if isinstance(p, ToolCallPart))
    assert message.tool_calls == expected and message.tool_calls is message.tool_calls
