"""Tools: schemas from type hints, validation, the registry, hand-written tools."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Literal, Optional

import pytest
from pydantic import BaseModel

from agentloop import Tool, ToolContext, ToolError, ToolOutput, ToolRegistry, tool
from agentloop.errors import ConfigurationError, ToolExecutionError, ToolNotFound
from agentloop.tools import render_content


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Filter(BaseModel):
    field: str
    value: int


@dataclass
class Window:
    start: int
    end: int


@tool
def search(
    query: str,
    limit: int = 10,
    mode: Literal["fast", "exact"] = "fast",
    color: Color | None = None,
    tags: list[str] | None = None,
    meta: dict[str, int] | None = None,
    where: Filter | None = None,
    window: Window | None = None,
    legacy: Optional[str] = None,  # noqa: UP045 - Optional must keep working
) -> str:
    """Search the index.

    Args:
        query: The text to look for.
        limit: How many hits to return,
            at most.
        mode: Matching mode.
    """
    return f"{query}:{limit}:{mode}:{color}:{tags}:{meta}:{where}:{window}:{legacy}"


def test_schema_from_type_hints() -> None:
    schema = search.parameters
    props = schema["properties"]
    assert schema["required"] == ["query"]
    assert props["query"] == {
        "type": "string",
        "title": "Query",
        "description": "The text to look for.",
    }
    assert props["limit"]["default"] == 10
    assert props["limit"]["description"] == "How many hits to return, at most."
    assert props["mode"]["enum"] == ["fast", "exact"]
    assert (
        "Color" in schema["$defs"] and "Filter" in schema["$defs"] and "Window" in schema["$defs"]
    )
    assert search.description == "Search the index."
    assert search.name == "search"
    assert search.spec().parameters is schema


def test_validation_coerces_into_the_declared_types() -> None:
    args = search.validate(
        {
            "query": "q",
            "color": "red",
            "where": {"field": "a", "value": "3"},
            "window": {"start": 1, "end": 2},
        }
    )
    assert args["color"] is Color.RED
    assert args["where"] == Filter(field="a", value=3)
    assert args["window"] == Window(1, 2)


def test_validation_problems_name_the_field() -> None:
    with pytest.raises(ToolError) as info:
        search.validate({"query": 3, "mode": "slow", "extra": 1})
    text = info.value.message
    assert text.startswith(
        "Invalid arguments for tool 'search': query: Input should be a valid string"
    )
    assert "mode: Input should be 'fast' or 'exact'" in text
    assert "extra: Extra inputs are not permitted" in text


def test_rest_docstrings_are_read() -> None:
    @tool
    def f(a: int) -> int:
        """Do it.

        :param a: the number
        """
        return a

    assert f.parameters["properties"]["a"]["description"] == "the number"
    assert f.description == "Do it."


def test_name_description_and_timeout_options() -> None:
    @tool(name="renamed", description="custom", timeout=3)
    async def f() -> str:
        """Ignored."""
        return "x"

    assert (f.name, f.description, f.timeout, f.is_async) == ("renamed", "custom", 3, True)


@pytest.mark.parametrize(
    "func_src",
    [
        "def f(x): return x",
        "def f(*args: int): return 1",
        "def f(**kw: int): return 1",
        "import socket\ndef f(x: socket.socket): return 1",
    ],
)
def test_unsupported_signatures_are_configuration_errors(func_src: str) -> None:
    namespace: dict[str, Any] = {}
    exec(func_src, namespace)
    with pytest.raises(ConfigurationError):
        tool(namespace["f"])


class Opaque:
    """Not describable as JSON."""


def test_unsupported_annotation_names_the_tool() -> None:
    def g(x: Opaque) -> str:
        return ""

    with pytest.raises(ConfigurationError, match="tool 'g': parameter 'x'") as info:
        tool(g)
    assert info.value.field == "x"


def test_negative_timeout_is_rejected() -> None:
    with pytest.raises(ConfigurationError):
        tool(timeout=-1)(lambda: None)


def test_registry_rejects_duplicates_and_lists_sorted_names() -> None:
    @tool
    def b() -> str:
        """B."""
        return "b"

    @tool
    def a() -> str:
        """A."""
        return "a"

    registry = ToolRegistry([b, a])
    assert registry.names() == ["a", "b"] and len(registry) == 2 and "a" in registry
    with pytest.raises(ConfigurationError, match="two tools are named 'a'"):
        registry.register(a)
    assert [s.name for s in registry.specs()] == ["b", "a"]


def test_plain_function_is_wrapped() -> None:
    def plain(x: int) -> int:
        """Plain."""
        return x

    registry = ToolRegistry([plain])
    assert registry.get("plain") is not None


async def test_direct_registry_use_raises_hard_errors() -> None:
    @tool
    def bad() -> str:
        """Bad."""
        raise ValueError("nope")

    @tool
    def soft() -> ToolOutput:
        """Soft."""
        return ToolOutput("broken", is_error=True)

    @tool
    def good(x: int) -> dict[str, int]:
        """Good."""
        return {"x": x}

    registry = ToolRegistry([bad, soft, good])
    with pytest.raises(ToolNotFound) as info:
        await registry.execute("god", {})
    assert str(info.value) == "Tool not found: god. Available: bad, good, soft"
    with pytest.raises(ToolExecutionError, match="bad: ValueError: nope"):
        await registry.execute("bad", {})
    with pytest.raises(ToolExecutionError, match="soft: broken"):
        await registry.execute("soft", {})
    assert await registry.execute("good", {"x": 2}) == '{"x": 2}'


async def test_hand_written_tool() -> None:
    class Echo(Tool):
        name = "echo"
        description = "Echo."
        parameters = {  # noqa: RUF012
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        }

        async def call(self, arguments: Any, ctx: ToolContext) -> Any:
            return arguments["text"]

    echo = Echo()
    with pytest.raises(ToolError, match="text: Field required"):
        echo.validate({})
    assert await ToolRegistry([echo]).execute("echo", {"text": "hi"}) == "hi"
    assert echo.spec().name == "echo"


def test_render_content() -> None:
    assert render_content("x") == "x"
    assert render_content(None) == ""
    assert render_content({"a": (1, 2)}) == '{"a": [1, 2]}'
    assert render_content(Color.RED) == '"red"'
    assert render_content({1, 2}) in ("[1,2]", "[2,1]")

    class Strange:
        def __str__(self) -> str:
            return "strange"

    assert render_content(Strange()) == '"strange"'


def test_decorated_function_stays_callable() -> None:
    assert search("q").startswith("q:10:fast")


def test_registry_specs_follow_the_tools_and_a_hand_written_spec() -> None:
    @tool
    async def first(x: int) -> int:
        """One."""
        return x

    @tool
    async def second(x: int) -> int:
        """Two."""
        return x

    class Moving(Tool):
        name, description, parameters = "moving", "before", {"type": "object"}

    registry = ToolRegistry([first])
    assert registry.specs() is registry.specs()  # built once while the tools stay
    registry.register(second)
    assert [s.name for s in registry.specs()] == ["first", "second"]
    registry.unregister("first")
    assert [s.name for s in registry.specs()] == ["second"]
    moving = Moving()
    registry.register(moving)
    moving.description = "after"  # a hand-written tool's spec follows its attributes
    assert registry.specs()[-1].description == "after"
