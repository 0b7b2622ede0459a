"""Plain ``str`` arguments skip pydantic only where pydantic would answer them unchanged.

``agentloop._plain_args`` is a shortcut for the common tool (every parameter a required,
unconstrained ``str``): these properties hold it to the validator over arbitrary arguments, and
pin which tools may take it.
"""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import AfterValidator, Field

from agentloop import ToolContext, ToolError, tool
from agentloop._plain_args import plain_arguments, plain_fields
from agentloop.engine.invoke import _checked
from agentloop.tools import FunctionTool


@tool
async def one(key: str) -> str:
    """One key."""
    return key


@tool
async def two(key: str, other: str) -> str:
    """Two keys."""
    return key + other


@tool
async def none() -> str:
    """No parameter."""
    return ""


@tool
async def with_context(ctx: ToolContext, key: str) -> str:
    """A context, then a key."""
    return key


class _Sub(str):
    __slots__ = ()


values = st.one_of(
    st.text(),
    st.text().map(_Sub),
    st.integers(),
    st.none(),
    st.booleans(),
    st.binary(max_size=4),
    st.lists(st.text(max_size=2), max_size=2),
    st.dictionaries(st.text(max_size=2), st.text(max_size=2), max_size=2),
)
keys = st.sampled_from(("key", "other", "extra", "__invalid_json__"))


def _validated(t: FunctionTool, arguments: dict[str, Any]) -> dict[str, Any] | str:
    try:
        return dict(t.validate(arguments))
    except ToolError as exc:
        return exc.message


@pytest.mark.parametrize("t", [one, two, none, with_context], ids=lambda t: t.name)
def test_a_tool_of_plain_str_parameters_takes_the_shortcut(t: FunctionTool) -> None:
    assert t._plain == tuple(t.parameters.get("properties", {}))


@settings(max_examples=400, deadline=None)
@given(st.sampled_from([one, two, none, with_context]), st.dictionaries(keys, values, max_size=4))
def test_the_shortcut_answers_what_the_validator_answers(
    t: FunctionTool, arguments: dict[str, Any]
) -> None:
    assert t._plain is not None
    fast = plain_arguments(t._plain, arguments)
    if fast is None:
        return
    slow = _validated(t, dict(arguments))
    assert fast == slow
    assert list(fast) == list(slow)  # the parameters' order
    assert all(fast[k] is arguments[k] for k in fast)  # the same strings, unchanged
    assert fast is not arguments  # a new dict: the recorded call stays as it was


@settings(max_examples=200, deadline=None)
@given(st.sampled_from([one, two, none]), st.dictionaries(keys, values, max_size=4))
def test_the_engine_check_agrees_with_the_validator(
    t: FunctionTool, arguments: dict[str, Any]
) -> None:
    problem, valid = _checked(t, t.name, arguments)
    slow = _validated(t, dict(arguments))
    if isinstance(slow, str):  # refused: the validator's own words (or the JSON note)
        assert problem is not None
    elif "__invalid_json__" not in arguments or len(arguments) != 1:
        assert problem is None and dict(valid) == slow


async def _constrained(key: Annotated[str, Field(max_length=3)]) -> str:
    """Constrained."""
    return key


async def _defaulted(key: str = "x") -> str:
    """Defaulted."""
    return key


async def _aliased(key: Annotated[str, Field(alias="k")]) -> str:
    """Aliased."""
    return key


async def _checked_after(key: Annotated[str, AfterValidator(str.strip)]) -> str:
    """Checked after."""
    return key


async def _numeric(key: int) -> str:
    """A number."""
    return str(key)


async def _mixed(key: str, count: int) -> str:
    """Mixed."""
    return key * count


@pytest.mark.parametrize(
    "func", [_constrained, _defaulted, _aliased, _checked_after, _numeric, _mixed]
)
def test_any_other_tool_goes_to_the_validator(func: Any) -> None:
    t = tool(func)
    assert t._plain is None
    assert plain_fields(object) is None


def test_a_stripping_model_is_not_plain() -> None:
    from pydantic import ConfigDict, create_model

    from agentloop._schema import ArgumentModel

    class Stripping(ArgumentModel):
        model_config = ConfigDict(str_strip_whitespace=True)

    model = create_model("m", __base__=Stripping, key=(str, ...))
    assert plain_fields(model) is None
    assert plain_fields(create_model("n", __base__=ArgumentModel, key=(str, ...))) == ("key",)
