"""SPEC 21, the habits people bring: each bullet's behaviour, then a table of wrong calls.

The table is what a pydantic-ai or OpenAI Agents SDK user types on the first day; each row
asserts the error type and that the message names our word for it. ``docs/coming-from-peers.md``
shows the same table to people (a test checks each row's word is on that page).
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import inspect
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import agentloop
from agentloop import (
    Agent,
    Budget,
    FallbackClient,
    ModelSettings,
    RunConfig,
    RunContext,
    Settings,
    ToolContext,
    ToolRegistry,
    build_client,
    tool,
)
from agentloop import events as ev
from agentloop._util.peers import hinting
from agentloop.errors import (
    AuthError,
    BudgetExhausted,
    ConfigurationError,
    InternalError,
    InvalidInput,
    MaxTurnsExceeded,
)
from agentloop.messages import ImagePart, Message
from agentloop.model import ModelRequest
from agentloop.providers import RetryingClient
from agentloop.testing import FunctionModel, ScriptedModel, call, reply

ROOT = Path(__file__).parent.parent

KEYS = {
    "OPENAI_API_KEY": "sk-test-openai",
    "ANTHROPIC_API_KEY": "sk-ant-test",
    "GEMINI_API_KEY": "gm-test",
    "OPENROUTER_API_KEY": "sk-or-test",
}


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name, value in KEYS.items():
        monkeypatch.setenv(name, value)
    yield


def inner(client: Any) -> Any:
    """The client a ``RetryingClient`` wraps."""
    assert isinstance(client, RetryingClient)
    return client.inner


# -- 1. "provider:model" strings ------------------------------------------------------------


@pytest.mark.parametrize(
    "spec",
    [
        "openai:gpt-5-mini",
        "anthropic:claude-sonnet-4-5",
        "gemini:gemini-2.5-flash",
        "openrouter:openai/gpt-4o-mini",
        "ollama:llama3.2:3b",
    ],
)
def test_a_model_string_builds_what_build_client_builds(keys: None, spec: str) -> None:
    provider, model = spec.split(":", 1)
    agent = Agent(spec)
    expected = build_client(Settings(provider, model))
    assert type(agent.client) is type(expected) is RetryingClient  # retries on
    assert type(inner(agent.client)) is type(inner(expected))
    assert (agent.client.provider, agent.client.model) == (provider, model)
    assert repr(agent.client) == repr(expected)  # same endpoint, same retry policy


def test_a_model_string_reads_the_key_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(AuthError, match="ANTHROPIC_API_KEY is not set"):
        Agent("anthropic:claude-sonnet-4-5")


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("gpt-4o", "'openai:gpt-4o'"),
        ("perplexity:sonar", "unknown provider 'perplexity'"),
        ("google-vertex:gemini-2.5-flash", "did you mean 'vertex:gemini-2.5-flash'?"),
        ("google-gla:gemini-2.5-flash", "did you mean 'gemini:gemini-2.5-flash'?"),
        ("openai:", "names no model"),
        ("", "needs a provider and a model"),
    ],
)
def test_a_bad_model_string_lists_the_providers(spec: str, says: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        Agent(spec)
    message = str(caught.value)
    assert says in message
    assert "providers: openai, openrouter, ollama, anthropic, gemini" in message
    assert caught.value.field == "model"


def test_model_strings_in_a_fallback_chain(keys: None) -> None:
    chain = FallbackClient(["openai:gpt-5-mini", "anthropic:claude-sonnet-4-5", ScriptedModel([])])
    assert [c.model for c in chain.clients] == ["gpt-5-mini", "claude-sonnet-4-5", "scripted"]
    assert [c.provider for c in chain.clients[:2]] == ["openai", "anthropic"]
    assert all(isinstance(c, RetryingClient) for c in chain.clients[:2])
    with pytest.raises(ConfigurationError, match="unknown provider 'nope'"):
        FallbackClient(["openai:gpt-5-mini", "nope:x"])


async def test_an_agent_built_from_a_string_serves_as_a_tool(keys: None) -> None:
    """``Agent("openai:...").as_tool(...)``: the child's client is its own, built once."""
    child = Agent("openai:gpt-5-mini", system="You look things up.")
    helper = child.as_tool(name="researcher", description="Looks things up.")
    parent = Agent(
        ScriptedModel([call("researcher", {"input": "who?"}), reply("done")]), tools=[helper]
    )
    with child.override(model=ScriptedModel([reply("Ada")])):  # no network in a test
        run = await parent.run("ask")
    assert run.output == "done"
    assert run.turns[0].tool_results[0].content == "Ada"
    assert child.client.model == "gpt-5-mini"


def test_importing_the_api_loads_no_provider_and_a_string_loads_them() -> None:
    code = (
        "import sys\n"
        "from agentloop import Agent, tool\n"
        "from agentloop.testing import ScriptedModel\n"
        "Agent(ScriptedModel([]))\n"
        "print(any(m.startswith('agentloop.providers') for m in sys.modules), "
        "'aiohttp' in sys.modules)\n"
        "Agent('ollama:llama3.2')\n"
        "print('agentloop.providers.settings' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "False", "True"]


# -- 2. instructions= and system prompt functions ----------------------------------------------


async def test_instructions_is_system() -> None:
    model = ScriptedModel([reply("ok")])
    agent = Agent(model, instructions="Be brief.")
    await agent.run("hi")
    assert agent.system == "Be brief." and model.requests[0].system == "Be brief."
    with pytest.raises(ConfigurationError, match="same thing") as caught:
        Agent(model, system="a", instructions="b")
    assert caught.value.field == "instructions"


@pytest.mark.parametrize("kind", ["sync", "async", "no-argument"])
async def test_a_prompt_function_is_evaluated_at_each_run_with_deps(kind: str) -> None:
    seen: list[RunContext[str]] = []

    def sync_prompt(ctx: RunContext[str]) -> str:
        seen.append(ctx)
        return f"The user is {ctx.deps}."

    async def async_prompt(ctx: RunContext[str]) -> str:
        return sync_prompt(ctx)

    calls = iter(range(10))
    prompts: dict[str, Any] = {
        "sync": sync_prompt,
        "async": async_prompt,
        "no-argument": lambda: f"Call {next(calls)}.",
    }
    model = ScriptedModel([call("echo", {"text": "x"}), reply("one"), reply("two")])

    @tool
    def echo(text: str) -> str:
        """Echo."""
        return text

    agent = Agent(model, system=prompts[kind], tools=[echo])
    first = await agent.run("hi", deps="ada")
    await agent.run("again", deps="bob")
    systems = [r.system for r in model.requests]
    if kind == "no-argument":
        assert systems == ["Call 0.", "Call 0.", "Call 1."]  # once per run, for every turn
    else:
        assert systems == ["The user is ada."] * 2 + ["The user is bob."]
        assert (seen[0].run_id, seen[0].session_id) == (first.id, agent.session_id)


async def test_a_prompt_function_joins_text_output_mode_instructions() -> None:
    model = ScriptedModel([reply("3")])
    agent = Agent(
        model,
        output_type=int,
        instructions=lambda ctx: "Count.",
        config=RunConfig(output_mode="text"),
    )
    run = await agent.run("how many?")
    assert run.output == 3
    system = model.requests[0].system
    assert system is not None and system.startswith("Count.\n\n") and "JSON" in system


async def test_a_failing_prompt_function_ends_the_run_naming_it() -> None:
    def broken(ctx: RunContext[Any]) -> str:
        raise KeyError("tenant")

    agent = Agent(ScriptedModel([reply("never")]), instructions=broken)
    with pytest.raises(InternalError, match=r"function .*broken raised KeyError") as caught:
        await agent.run("hi")
    assert isinstance(caught.value.__cause__, KeyError)
    assert agent.runs[0].stop_reason is caught.value

    wrong = Agent(ScriptedModel([reply("never")]), instructions=lambda ctx: 42)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="must return a str"):
        await wrong.run("hi")


def test_a_prompt_of_another_kind_is_refused_at_construction() -> None:
    model = ScriptedModel([])
    with pytest.raises(ConfigurationError, match=r"join a list"):
        Agent(model, instructions=["a", "b"])  # type: ignore[call-overload]
    with pytest.raises(ConfigurationError, match="must take one argument"):
        Agent(model, system=lambda a, b: "x")  # type: ignore[arg-type]


async def test_a_tool_may_declare_its_context_as_run_context() -> None:
    @tool
    def whoami(ctx: RunContext[str]) -> str:
        """Who is asking."""
        assert isinstance(ctx, ToolContext)
        return str(ctx.deps)

    agent = Agent(ScriptedModel([call("whoami"), reply("done")]), tools=[whoami])
    run = await agent.run("hi", deps="ada")
    assert whoami.parameters["properties"] == {}
    assert run.turns[0].tool_results[0].content == "ada"


# -- 3. @agent.tool ------------------------------------------------------------------------


async def test_agent_tool_registers_on_the_agent() -> None:
    model = ScriptedModel(
        [call("double", {"n": 2}), reply("4"), call("triple", {"n": 2}), reply("6")]
    )
    agent = Agent(model)

    @agent.tool
    def double(n: int) -> int:
        """Double n."""
        return 2 * n

    @agent.tool(name="triple", description="Triple n.", timeout=5)
    async def times_three(ctx: ToolContext, n: int) -> int:
        return 3 * n

    assert double(3) == 6  # still the function, as @tool leaves it
    assert agent.registry.names() == ["double", "triple"]
    assert agent.registry.get("triple").timeout == 5  # type: ignore[union-attr]
    first = await agent.run("double 2")
    second = await agent.session().run("triple 2")  # every session sees the agent's tools
    assert first.turns[0].tool_results[0].content == "4"
    assert second.turns[0].tool_results[0].content == "6"
    assert [s.name for s in model.requests[0].tools] == ["double", "triple"]


def test_agent_tool_takes_every_tool_option() -> None:
    def keywords(fn: Callable[..., Any]) -> set[str]:
        kinds = (inspect.Parameter.KEYWORD_ONLY,)
        return {p.name for p in inspect.signature(fn).parameters.values() if p.kind in kinds}

    options = {"name", "description", "timeout", "requires_approval", "external", "defer_loading"}
    assert keywords(Agent(ScriptedModel([])).tool) == keywords(tool) == options


def test_agent_tool_refuses_what_tool_refuses() -> None:
    agent = Agent(ScriptedModel([]), output_type=int)
    with pytest.raises(ConfigurationError, match="final_result"):

        @agent.tool(name="final_result")
        def answer(x: int) -> int:
            """Answer."""
            return x

    with pytest.raises(ConfigurationError, match="two tools are named 'f'"):
        for _ in range(2):

            @agent.tool(name="f")
            def f(x: int) -> int:
                """F."""
                return x


# -- 4. per-run model settings and limits; tool_choice_once -------------------------------------


async def test_per_run_settings_replace_the_configs_for_that_run_only() -> None:
    model = ScriptedModel([reply("a"), reply("b"), reply("c"), reply("d"), reply("e")])
    config = RunConfig(model_settings=ModelSettings(temperature=0.5))
    agent = Agent(model, config=config)
    session = agent.session()
    await agent.run("x", model_settings=ModelSettings(temperature=0.1))
    await agent.run("x")
    await session.run("x", model_settings=ModelSettings(temperature=0.2))
    async with agent.stream("x", model_settings=ModelSettings(temperature=0.3)) as events:
        async for _ in events:
            pass
    async with session.stream("x", model_settings=ModelSettings(seed=7)) as events:
        async for _ in events:
            pass
    temperatures = [r.settings.temperature for r in model.requests]
    assert temperatures == [0.1, 0.5, 0.2, 0.3, None]
    assert model.requests[-1].settings.seed == 7


def test_per_run_settings_on_the_sync_facades() -> None:
    model = ScriptedModel([reply("a"), reply("b"), reply("c")])
    agent = Agent(model)
    agent.run_sync("x", model_settings=ModelSettings(max_tokens=11))
    agent.session().run_sync("x", model_settings=ModelSettings(max_tokens=12))
    agent.run_sync("x")
    agent.close()
    assert [r.settings.max_tokens for r in model.requests] == [11, 12, None]


async def test_usage_limits_are_this_runs_budget() -> None:
    steps = [call("noop"), call("noop"), reply("done")]
    model = ScriptedModel(steps * 3)

    @tool
    def noop() -> str:
        """Do nothing."""
        return ""

    agent = Agent(model, tools=[noop], config=RunConfig(budget=Budget(turns=10)))
    with pytest.raises(BudgetExhausted) as caught:
        await agent.run("x", usage_limits=Budget(turns=1))
    assert (caught.value.dimension, caught.value.limit) == ("turns", 1)
    assert (await agent.run("again")).output == "done"  # the config's budget is back
    with pytest.raises(BudgetExhausted):
        await agent.session().run("x", usage_limits=Budget(tool_calls=1))
    with pytest.raises(BudgetExhausted):
        agent_stream = agent.stream("x", usage_limits=Budget(turns=1))
        async with agent_stream as events:
            async for _ in events:
                pass


async def test_usage_limits_reach_a_child_agent() -> None:
    """A child's spend counts in the parent's per-run gate, as in the config's (SPEC 13)."""

    @tool
    def noop() -> str:
        """Do nothing."""
        return ""

    child = Agent(ScriptedModel([call("noop"), call("noop"), reply("c")]), tools=[noop])
    parent = Agent(
        ScriptedModel([call("kid", {"input": "go"}), reply("never")]),
        tools=[child.as_tool(name="kid", description="A child.")],
    )
    with pytest.raises(BudgetExhausted):
        await parent.run("x", usage_limits=Budget(turns=2))


async def test_per_run_options_of_the_wrong_type_name_the_fix() -> None:
    agent = Agent(ScriptedModel([]))
    with pytest.raises(InvalidInput, match=r"ModelSettings\(temperature"):
        await agent.run("x", model_settings={"temperature": 0})  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match=r"Budget\(turns="):
        await agent.run("x", usage_limits={"request_limit": 3})  # type: ignore[arg-type]
    assert agent.runs == []


def forcing(request: ModelRequest) -> Any:
    """A model that calls the tool whenever the request forces it, else answers."""
    return call("lookup", {"key": "a"}) if request.settings.tool_choice == "lookup" else reply("ok")


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return key.upper()


async def test_tool_choice_once_forces_the_first_turn_only() -> None:
    model = FunctionModel(forcing)
    settings = ModelSettings(tool_choice="lookup", tool_choice_once=True, temperature=0.2)
    agent = Agent(model, tools=[lookup], config=RunConfig(model_settings=settings))
    run = await agent.run("x")
    assert run.output == "ok" and len(run.turns) == 2
    assert [r.settings.tool_choice for r in model.requests] == ["lookup", "auto"]
    assert model.requests[1].settings.temperature == 0.2  # only the choice changes
    await agent.run("again")  # each run forces its own first turn
    assert [r.settings.tool_choice for r in model.requests[2:]] == ["lookup", "auto"]


async def test_without_tool_choice_once_a_forced_choice_loops() -> None:
    model = FunctionModel(forcing)
    agent = Agent(
        model,
        tools=[lookup],
        config=RunConfig(max_turns=4, model_settings=ModelSettings(tool_choice="lookup")),
    )
    with pytest.raises(MaxTurnsExceeded):
        await agent.run("x")
    per_run = ModelSettings(tool_choice="lookup", tool_choice_once=True)
    assert (await agent.run("x", model_settings=per_run)).output == "ok"


def test_tool_choice_once_is_a_bool() -> None:
    with pytest.raises(ConfigurationError, match="tool_choice_once must be a bool"):
        ModelSettings(tool_choice_once="yes")  # type: ignore[arg-type]


# -- 5. agent.override ------------------------------------------------------------------------


async def test_override_swaps_the_model_and_restores_it() -> None:
    real, fake = ScriptedModel([reply("real")] * 3), ScriptedModel([reply("fake")] * 3)
    agent = Agent(real)
    with agent.override(model=fake):
        assert (await agent.run("x")).output == "fake"
        assert (await agent.session().run("x")).output == "fake"
    assert (await agent.run("x")).output == "real"
    with pytest.raises(RuntimeError, match="boom"), agent.override(model=fake):
        raise RuntimeError("boom")
    assert (await agent.run("x")).output == "real"
    assert agent.client is real and len(fake.requests) == 2


async def test_override_swaps_the_tools() -> None:
    @tool
    def lookup(key: str) -> str:
        """The real lookup."""
        return "real"

    def fake_lookup(key: str) -> str:
        """A stub."""
        return "stub"

    model = ScriptedModel([call("lookup", {"key": "k"}), reply("a")] * 2)
    agent = Agent(model, tools=[lookup])
    stub = tool(name="lookup")(fake_lookup)
    with agent.override(tools=[stub]):
        run = await agent.run("x")
    assert run.turns[0].tool_results[0].content == "stub"
    assert model.requests[0].tools[0].description == "A stub."
    run = await agent.run("x")
    assert run.turns[0].tool_results[0].content == "real"


async def test_override_nests_and_takes_a_model_string(keys: None) -> None:
    agent = Agent(ScriptedModel([reply("real")]))
    inner_model = ScriptedModel([reply("inner")])
    with agent.override(model="openai:gpt-5-mini"), agent.override(tools=[lookup]):
        with agent.override(model=inner_model):
            run = await agent.run("x")
        assert run.output == "inner" and inner_model.requests[0].tools[0].name == "lookup"
    with pytest.raises(ConfigurationError, match="unknown provider"):
        agent.override(model="nope:x").__enter__()


async def test_override_holds_in_its_task_and_the_tasks_it_creates_only() -> None:
    real = FunctionModel(lambda request: reply("real"))
    fake = FunctionModel(lambda request: reply("fake"))
    agent = Agent(real)
    entered, other_done = asyncio.Event(), asyncio.Event()

    async def inside() -> list[str | None]:
        with agent.override(model=fake):
            entered.set()
            await other_done.wait()  # the other task ran while this block was open
            mine = await agent.session("a").run("x")
            child = await asyncio.create_task(agent.session("b").run("x"))
        return [mine.output, child.output]

    async def outside() -> str | None:
        await entered.wait()
        run = await agent.session("c").run("x")
        other_done.set()
        return run.output

    inside_outputs, outside_output = await asyncio.gather(inside(), outside())
    assert inside_outputs == ["fake", "fake"] and outside_output == "real"


def test_override_refuses_what_the_agent_refuses() -> None:
    agent = Agent(ScriptedModel([]), output_type=int)

    @tool
    def final_result(x: int) -> int:
        """Clash."""
        return x

    with pytest.raises(ConfigurationError, match="final_result"):
        agent.override(tools=[final_result]).__enter__()
    with pytest.raises(ConfigurationError, match="list of tools"):
        agent.override(tools=final_result).__enter__()  # type: ignore[arg-type]


# -- 7. events and the package's surface ---------------------------------------------------------


async def test_turn_index_is_an_int_on_every_event() -> None:
    agent = Agent(ScriptedModel([call("lookup", {"key": "a"}), reply("ok")]), tools=[lookup])
    async with agent.stream("x") as stream:
        events = [event async for event in stream]
    assert all(type(e.turn_index) is int for e in events)
    started = [e.turn_index for e in events if isinstance(e, ev.TurnStarted)]
    finished = [e for e in events if isinstance(e, ev.TurnFinished)]
    assert started == [f.turn_index for f in finished] == [0, 1]
    assert [f.turn.index for f in finished] == [0, 1]  # SPEC 12: TurnFinished(turn) is the record


def test_dir_shows_public_names_only() -> None:
    names = dir(agentloop)
    assert set(agentloop.__all__) <= set(names)
    assert not [n for n in names if n.startswith("_")]
    assert {"TYPE_CHECKING", "annotations", "lazy_exports"}.isdisjoint(names)


# -- 6. the mistakes ---------------------------------------------------------------------------


class Invoice:
    """A plain class used as an output type by mistake (as an instance)."""


async def fetch(url: str) -> str:
    """Fetch a page."""
    return url


def fresh() -> Agent[str | None]:
    return Agent(ScriptedModel([reply("ok")]))


def iterate_without_block() -> None:
    for _ in fresh().stream("x"):  # type: ignore[attr-defined]
        pass


def async_iterate_without_block() -> None:
    async def consume() -> None:
        async for _ in fresh().stream("x"):
            pass

    asyncio.run(consume())


def finished() -> agentloop.Run[str | None]:
    return fresh().run_sync("x")


def import_runner() -> None:
    from agentloop import Runner  # type: ignore[attr-defined]  # noqa: F401


def decorate(factory: Callable[[Agent[str | None]], Any]) -> Callable[[], None]:
    def act() -> None:
        def f(x: int) -> int:
            """F."""
            return x

        factory(fresh())(f)

    return act


@dataclasses.dataclass(frozen=True)
class Mistake:
    """One wrong call: what was written, the error it raises and the words that fix it."""

    wrote: str
    act: Callable[[], Any]
    error: type[BaseException]
    fix: str


MODEL = ScriptedModel([])

MISTAKES = [
    Mistake("Agent(model, message_history=...)", lambda: Agent(MODEL, message_history=[]), TypeError, "history="),  # type: ignore[call-overload]  # noqa: E501
    Mistake("agent.run(..., message_history=...)", lambda: fresh().run("x", message_history=[]), TypeError, "history="),  # type: ignore[call-arg]  # noqa: E501
    Mistake("agent.run_sync(..., message_history=...)", lambda: fresh().run_sync("x", message_history=[]), TypeError, "history="),  # type: ignore[call-arg]  # noqa: E501
    Mistake("agent.session(..., message_history=...)", lambda: fresh().session("s", message_history=[]), TypeError, "history="),  # type: ignore[call-arg]  # noqa: E501
    Mistake("Agent(model, deps_type=...)", lambda: Agent(MODEL, deps_type=int), TypeError, "deps="),  # type: ignore[call-overload]
    Mistake("Agent(model, result_type=...)", lambda: Agent(MODEL, result_type=int), TypeError, "output_type="),  # type: ignore[call-overload]  # noqa: E501
    Mistake("Agent(model, system_prompt=...)", lambda: Agent(MODEL, system_prompt="x"), TypeError, "instructions="),  # type: ignore[call-overload]  # noqa: E501
    Mistake("Agent(model, model_settings=...)", lambda: Agent(MODEL, model_settings=ModelSettings()), TypeError, "RunConfig(model_settings="),  # type: ignore[call-overload]  # noqa: E501
    Mistake("Agent(model, mcp_servers=[...])", lambda: Agent(MODEL, mcp_servers=[]), TypeError, "tools=[...]"),  # type: ignore[call-overload]  # noqa: E501
    Mistake("Agent(model, input_guardrails=[...])", lambda: Agent(MODEL, input_guardrails=[]), TypeError, "guardrails="),  # type: ignore[call-overload]  # noqa: E501
    Mistake("Agent(model, reset_tool_choice=...)", lambda: Agent(MODEL, reset_tool_choice=True), TypeError, "tool_choice_once=True"),  # type: ignore[call-overload]  # noqa: E501
    Mistake("Agent(model, output_type=\"Invoice\")", lambda: Agent(MODEL, output_type="Invoice"), ConfigurationError, "output_type=Invoice"),  # type: ignore[call-overload]  # noqa: E501
    Mistake("Agent(model, output_type=Invoice())", lambda: Agent(MODEL, output_type=Invoice()), ConfigurationError, "output_type=Invoice"),  # type: ignore[call-overload]  # noqa: E501
    Mistake("Agent(\"gpt-4o\")", lambda: Agent("gpt-4o"), ConfigurationError, "'openai:gpt-4o'"),
    Mistake("Agent(\"google-gla:...\")", lambda: Agent("google-gla:gemini-2.5-flash"), ConfigurationError, "'gemini:gemini-2.5-flash'"),  # noqa: E501
    Mistake("Agent(model, tools=[fetch(...)])", lambda: Agent(MODEL, tools=[fetch("u")]), ConfigurationError, "tools=[fetch]"),  # type: ignore[list-item]  # noqa: E501
    Mistake("ToolRegistry([fetch(...)])", lambda: ToolRegistry([fetch("u")]), ConfigurationError, "pass fetch itself"),  # type: ignore[list-item]  # noqa: E501
    Mistake("@tool on fetch(...)", lambda: tool(fetch("u")), ConfigurationError, "pass fetch itself"),  # type: ignore[call-overload]  # noqa: E501
    Mistake("Agent(model, tools=[{\"name\": ...}])", lambda: Agent(MODEL, tools=[{"name": "x", "parameters": {}}]), ConfigurationError, "decorate it with @tool"),  # type: ignore[list-item]  # noqa: E501
    Mistake("@tool(name_override=...)", lambda: tool(name_override="x"), TypeError, "name="),  # type: ignore[call-overload]
    Mistake("agent.as_tool(tool_name=..., tool_description=...)", lambda: fresh().as_tool(tool_name="x", tool_description="y"), TypeError, "name="),  # type: ignore[call-arg]  # noqa: E501
    Mistake("agent.run_sync(..., max_turns=...)", lambda: fresh().run_sync("x", max_turns=3), TypeError, "RunConfig(max_turns="),  # type: ignore[call-arg]  # noqa: E501
    Mistake("agent.run(..., context=...)", lambda: fresh().run("x", context={}), TypeError, "deps="),  # type: ignore[call-arg]  # noqa: E501
    Mistake("agent.run(..., output_type=...)", lambda: fresh().run("x", output_type=int), TypeError, "Agent(..., output_type="),  # type: ignore[call-arg]  # noqa: E501
    Mistake("agent.run_sync(..., dep=...)", lambda: fresh().run_sync("x", dep=1), TypeError, "did you mean deps=?"),  # type: ignore[call-arg]  # noqa: E501
    Mistake("agent.run_sync(..., usage_limits=UsageLimits(...))", lambda: fresh().run_sync("x", usage_limits={"request_limit": 1}), InvalidInput, "usage_limits=Budget("),  # type: ignore[arg-type]  # noqa: E501
    Mistake("agent.run_sync(..., model_settings={...})", lambda: fresh().run_sync("x", model_settings={"temperature": 0}), InvalidInput, "ModelSettings(temperature"),  # type: ignore[arg-type]  # noqa: E501
    Mistake("agent.run_sync([messages])", lambda: fresh().run_sync([Message.user("hi")]), InvalidInput, "history="),  # type: ignore[list-item]  # noqa: E501
    Mistake("run.final_output", lambda: finished().final_output, AttributeError, "use run.output"),  # type: ignore[attr-defined]
    Mistake("run.data", lambda: finished().data, AttributeError, "use run.output"),  # type: ignore[attr-defined]
    Mistake("run.result", lambda: finished().result, AttributeError, "use run.output"),  # type: ignore[attr-defined]
    Mistake("run.all_messages()", lambda: finished().all_messages(), AttributeError, "use run.conversation"),  # type: ignore[attr-defined]  # noqa: E501
    Mistake("from agentloop import Runner", import_runner, ImportError, "agent.run_sync(input)"),
    Mistake("for event in agent.stream(...)", iterate_without_block, TypeError, "async with agent.stream(input) as events"),  # noqa: E501
    Mistake("async for event in agent.stream(...)", async_iterate_without_block, TypeError, "async with agent.stream(input) as events"),  # noqa: E501
    Mistake("agent.run_stream(...)", lambda: fresh().run_stream, AttributeError, "async with agent.stream(input)"),  # noqa: E501
    Mistake("@agent.tool_plain", decorate(lambda a: a.tool_plain), AttributeError, "@agent.tool"),
    Mistake("@agent.system_prompt", decorate(lambda a: a.system_prompt), AttributeError, "system=fn"),  # noqa: E501
    Mistake("Budget(request_limit=...)", lambda: Budget(request_limit=3), TypeError, "turns="),  # type: ignore[call-arg]
    Mistake("ModelSettings(stop_sequences=...)", lambda: ModelSettings(stop_sequences=["x"]), TypeError, "stop=("),  # type: ignore[call-arg]  # noqa: E501
    Mistake("ModelSettings(parallel_tool_calls=...)", lambda: ModelSettings(parallel_tool_calls=True), TypeError, "RunConfig(parallel_tool_calls=True)"),  # type: ignore[call-arg]  # noqa: E501
    Mistake("RunConfig(model=...)", lambda: RunConfig(model="gpt-4o"), TypeError, "Agent('openai:gpt-5-mini')"),  # type: ignore[call-arg]  # noqa: E501
    Mistake("Agent(model, instructions=..., system=...)", lambda: Agent(MODEL, instructions="a", system="b"), ConfigurationError, "same thing"),  # noqa: E501
    Mistake("Agent(some_object)", lambda: Agent(object()), ConfigurationError, "'provider:model' string"),  # type: ignore[call-overload]  # noqa: E501
    Mistake("ImagePart(\"x.png\")", lambda: ImagePart("x.png"), InvalidInput, "ImagePart.from_path('x.png')"),  # type: ignore[arg-type]  # noqa: E501
]  # fmt: skip


def test_the_table_is_long_enough() -> None:
    assert len(MISTAKES) >= 20
    assert len({m.wrote for m in MISTAKES}) == len(MISTAKES)


@pytest.mark.parametrize("mistake", MISTAKES, ids=lambda m: m.wrote)
def test_a_peers_habit_is_named(mistake: Mistake) -> None:
    with pytest.raises(mistake.error) as caught:
        mistake.act()
    assert mistake.fix in str(caught.value)


def test_the_doc_page_shows_every_mistake() -> None:
    page = (ROOT / "docs" / "coming-from-peers.md").read_text()
    missing = [m.wrote for m in MISTAKES if f"`{m.wrote}`" not in page]
    assert missing == []


def test_a_forgotten_await_is_pythons_warning_naming_the_call() -> None:
    """Python names it (``coroutine 'Agent.run' was never awaited``); our wrapper keeps that."""
    agent = fresh()
    with pytest.warns(RuntimeWarning, match="coroutine 'Agent.run' was never awaited"):
        pending = agent.run("x")
        assert inspect.iscoroutine(pending)
        del pending
        gc.collect()


def test_run_sync_inside_a_running_loop_still_names_await() -> None:
    async def inside() -> None:
        fresh().run_sync("x")

    with pytest.raises(InvalidInput, match=r"await run\(\)"):
        asyncio.run(inside())


def test_a_typeerror_inside_a_call_is_not_rewritten() -> None:
    """Only a call that never entered the function is explained (the binding error)."""

    @hinting({"message_history": "history="})
    def inner(*, history: list[str]) -> None:
        raise TypeError("from inside")

    with pytest.raises(TypeError, match=r"^from inside$"):
        inner(history=[])
    with pytest.raises(TypeError, match="'message_history': history="):
        inner(message_history=[])  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="missing 1 required keyword-only argument"):
        inner()  # type: ignore[call-arg]


def test_history_messages_still_work_with_the_right_name() -> None:
    agent = fresh()
    run = agent.run_sync("x", history=[Message.user("earlier"), Message.assistant("noted")])
    agent.close()
    assert run.output == "ok"


@pytest.mark.parametrize(
    ("name", "ours"),
    [
        ("Runner", "agent.run(input)"),
        ("function_tool", "@tool"),
        ("RunContextWrapper", "ToolContext[Deps]"),
        ("ModelRetry", "ToolError("),
    ],
)
def test_a_peers_export_is_an_import_error_naming_ours(name: str, ours: str) -> None:
    with pytest.raises(ImportError, match=rf"^agentloop has no {name}: .*{re.escape(ours)}"):
        exec(f"from agentloop import {name}", {})
    with pytest.raises(ImportError) as caught:
        getattr(agentloop, name)
    assert caught.value.name == "agentloop"


def test_any_other_missing_name_is_still_the_usual_error() -> None:
    with pytest.raises(ImportError, match="cannot import name 'Nope'"):
        exec("from agentloop import Nope", {})
    assert not hasattr(agentloop, "Nope") and not hasattr(agentloop, "_Runner")


def test_a_runs_peer_words_leave_the_run_an_ordinary_object() -> None:
    """``__getattr__`` answers misses only: fields, pickling and copying are untouched."""
    import copy
    import pickle

    run = finished()
    assert not hasattr(run, "final_output") and not hasattr(run, "_private")
    with pytest.raises(AttributeError, match=r"'outptu': did you mean 'output'\?"):
        run.outptu  # type: ignore[attr-defined]  # noqa: B018
    with pytest.raises(AttributeError, match=r"^'Run' object has no attribute '_x'$"):
        run._x  # type: ignore[attr-defined]  # noqa: B018
    for twin in (copy.copy(run), copy.deepcopy(run), pickle.loads(pickle.dumps(run))):
        assert twin.output == run.output == "ok" and twin.id == run.id
