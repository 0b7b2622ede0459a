"""Construction mistakes get errors that name the fix (issue 12, point 6)."""

from __future__ import annotations

import pytest

from agentloop import Agent, ToolContext, tool
from agentloop.errors import ConfigurationError, ModelNotFound
from agentloop.providers.openai import OpenAIClient
from agentloop.testing import FakeProviderServer, FakeReply, ScriptedModel


def test_a_tool_context_that_is_not_first_says_where_it_goes() -> None:
    with pytest.raises(ConfigurationError, match="'ctx' must be the function's first parameter"):

        @tool
        def search(query: str, ctx: ToolContext) -> str:
            """Search."""
            return query


def test_a_tool_without_a_docstring_is_refused_with_the_fix() -> None:
    with pytest.raises(ConfigurationError, match=r"add|docstring or use @tool\(description=") as e:

        @tool
        def undocumented(x: int) -> int:
            return x

    assert "'undocumented' has no description" in str(e.value)

    @tool(description="Doubles x.")
    def documented_elsewhere(x: int) -> int:
        return 2 * x

    assert documented_elsewhere.description == "Doubles x."


def test_tools_given_as_one_tool_or_a_string_say_write_a_list() -> None:
    @tool
    def read_file(path: str) -> str:
        """Read a file."""
        return path

    with pytest.raises(ConfigurationError, match=r"write tools=\[\.\.\.\]"):
        Agent(ScriptedModel([]), tools=read_file)  # type: ignore[call-overload]
    with pytest.raises(ConfigurationError, match=r"got 'read_file'; write tools=\[\.\.\.\]"):
        Agent(ScriptedModel([]), tools="read_file")  # type: ignore[arg-type]


async def test_a_404_names_the_url_and_suggests_v1() -> None:
    async with FakeProviderServer([FakeReply("never")]) as server:
        root = server.root_url
        client = OpenAIClient("m", api_key="k", base_url=root)  # no /v1
        async with client:
            with pytest.raises(ModelNotFound) as caught:
                await Agent(client).run("hi")
    message = str(caught.value)
    assert f"for POST {root}/chat/completions" in message
    assert "usually serve under /v1 (check base_url)" in message


@pytest.mark.parametrize(
    ("client", "variable"),
    [("AnthropicClient", "ANTHROPIC_API_KEY"), ("GeminiClient", "GEMINI_API_KEY")],
)
def test_a_direct_client_reads_its_key_from_the_environment(
    client: str, variable: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentloop.errors import AuthError
    from agentloop.providers import anthropic, gemini

    cls = getattr(anthropic if client == "AnthropicClient" else gemini, client)
    monkeypatch.delenv(variable, raising=False)
    with pytest.raises(AuthError, match=f"{variable} is not set"):
        cls("m", api_key=None)
    monkeypatch.setenv(variable, "from-the-environment")
    assert cls("m", api_key=None).model == "m"


def test_an_observer_that_is_not_one_is_refused_with_the_fix() -> None:
    """A function (the peers' event handler habit) or any object without ``on_event`` was taken,
    then failed at every event of every run, logged and ignored: the app never heard a thing."""
    from agentloop import events as ev
    from agentloop.observers import Observer

    fix = r"subclass agentloop\.observers\.Observer"
    for wrong in (lambda event: None, print, object()):
        with pytest.raises(ConfigurationError, match=fix) as e:
            Agent(ScriptedModel([]), observers=[wrong])  # type: ignore[list-item]
        assert e.value.field == "observers"

    seen: list[str] = []

    class Duck:  # not an Observer, but it has on_event: taken
        def on_event(self, event: ev.Event) -> None:
            seen.append(type(event).__name__)

    class Turns(Observer):  # only a per-event method: taken
        def on_turn_start(self, run: object, index: int) -> None:
            seen.append(f"turn {index}")

    agent = Agent(ScriptedModel(["hi"]), observers=[Duck(), Turns()])  # type: ignore[list-item]
    assert agent.run_sync("go").output == "hi"
    assert seen[0] == "RunStarted" and "turn 0" in seen and seen[-1] == "RunFinished"


def test_a_hook_that_is_not_one_is_refused_with_the_fix() -> None:
    """A function given as a hook ended every run as an ``InternalError`` ("unexpected
    AttributeError in the engine") at its first hook call."""
    from agentloop import Hook
    from agentloop.messages import ToolCallPart
    from agentloop.tools import ToolContext as Context

    fix = r"subclass agentloop\.Hook and override the methods you need"
    for wrong in (lambda call, ctx: None, object()):
        with pytest.raises(ConfigurationError, match=fix) as e:
            Agent(ScriptedModel([]), hooks=[wrong])  # type: ignore[list-item]
        assert e.value.field == "hooks"

    class Partial:  # duck-typed, but without on_run_start and the rest: refused
        async def pre_tool(self, call: ToolCallPart, ctx: Context) -> None:
            return None

    with pytest.raises(ConfigurationError, match=fix):
        Agent(ScriptedModel([]), hooks=[Partial()])  # type: ignore[list-item]

    started: list[str] = []

    class Starts(Hook):
        async def on_run_start(self, run: object) -> None:
            started.append("run")

    assert Agent(ScriptedModel(["hi"]), hooks=[Starts()]).run_sync("go").output == "hi"
    assert started == ["run"]
