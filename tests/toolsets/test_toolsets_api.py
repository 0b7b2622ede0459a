"""SPEC 22's toolsets: composition, bad input, collisions, "offered is what counts", approval."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from agentloop import Agent, RunContext, tool
from agentloop.errors import ConfigurationError
from agentloop.model import ModelRequest, ToolSpec
from agentloop.testing import FunctionModel, ScriptedModel, call, reply
from agentloop.toolsets import DynamicToolset, FunctionToolset


@tool
def read(path: str) -> str:
    """Read a file."""
    return f"read {path}"


@tool
def write(path: str, text: str) -> str:
    """Write a file."""
    return f"wrote {path}"


def names(request: ModelRequest) -> list[str]:
    return sorted(s.name for s in request.tools)


def results(run: Any) -> list[tuple[str, bool]]:
    return [(p.content, p.is_error) for m in run.messages for p in m.tool_results_parts]


def files() -> FunctionToolset:
    return FunctionToolset([read, write], name="files")


async def test_a_function_toolset_offers_and_runs_its_tools() -> None:
    ts = FunctionToolset(name="misc")

    @ts.tool
    def ping() -> str:
        """Ping."""
        return "pong"

    model = ScriptedModel([call("ping"), reply("ok")])
    run = await Agent(model, toolsets=[ts]).run("go")
    assert names(model.requests[0]) == ["ping"]
    assert results(run) == [("pong", False)]


async def test_prefixed_renamed_and_filtered_compose() -> None:
    ts = (
        files()
        .renamed({"cat": "read"})
        .prefixed("fs")
        .filtered(lambda ctx, s: s.name != "fs_write")
    )
    model = ScriptedModel([call("fs_cat", {"path": "a"}), reply("ok")])
    run = await Agent(model, toolsets=[ts]).run("go")
    assert names(model.requests[0]) == ["fs_cat"]
    assert results(run) == [("read a", False)]


async def test_a_filter_gets_the_run_context_with_the_turn() -> None:
    seen: list[int] = []

    def only_first(ctx: RunContext[Any], spec: ToolSpec) -> bool:
        seen.append(ctx.turn)
        return ctx.turn == 0

    model = ScriptedModel([call("read", {"path": "a"}), call("read", {"path": "b"}), reply("x")])
    run = await Agent(model, toolsets=[files().filtered(only_first)]).run("go")
    assert [names(r) for r in model.requests] == [["read", "write"], [], []]
    # offered is what counts: the second call's request offered nothing
    assert results(run)[1] == ("tool 'read' is not available", True)
    assert seen[:2] == [0, 0] and 1 in seen


async def test_a_filter_that_raises_offers_nothing_of_its_toolset(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(ctx: RunContext[Any], spec: ToolSpec) -> bool:
        raise RuntimeError("db down")

    other = FunctionToolset([write], name="other")
    model = ScriptedModel([call("read", {"path": "a"}), reply("done")])
    with caplog.at_level(logging.ERROR, logger="agentloop"):
        run = await Agent(model, toolsets=[FunctionToolset([read]).filtered(broken), other]).run(
            "go"
        )
    assert names(model.requests[0]) == ["write"]
    assert results(run)[0][0].startswith("tool 'read' is not available")
    assert run.output == "done"
    assert "RuntimeError: db down" in caplog.text


async def test_a_filter_returning_a_wrong_type_fails_closed() -> None:
    model = ScriptedModel([reply("done")])
    await Agent(model, toolsets=[files().filtered(lambda ctx, s: "yes")]).run("go")
    assert names(model.requests[0]) == []


async def test_prepared_chooses_and_redescribes_per_call() -> None:
    async def prepare(ctx: RunContext[Any], specs: list[ToolSpec]) -> list[ToolSpec]:
        return [
            ToolSpec(s.name, f"turn {ctx.turn}: {s.description}", s.parameters)
            for s in specs
            if s.name == "read"
        ]

    model = ScriptedModel([call("read", {"path": "a"}), reply("ok")])
    run = await Agent(model, toolsets=[files().prepared(prepare)]).run("go")
    assert [s.description for s in model.requests[0].tools] == ["turn 0: Read a file."]
    assert model.requests[1].tools[0].description == "turn 1: Read a file."
    assert results(run) == [("read a", False)]


async def test_prepared_that_raises_offers_nothing() -> None:
    def prepare(ctx: RunContext[Any], specs: list[ToolSpec]) -> list[ToolSpec]:
        raise ValueError("no")

    model = ScriptedModel([reply("ok")])
    await Agent(model, toolsets=[files().prepared(prepare)]).run("go")
    assert names(model.requests[0]) == []


async def test_run_toolsets_add_for_one_run_and_override_replaces() -> None:
    model = ScriptedModel([reply("a"), reply("b"), reply("c")])
    agent = Agent(model, tools=[write], toolsets=[FunctionToolset([read], name="r")])
    await agent.run(
        "go", toolsets=[FunctionToolset([tool(name="extra", description="x")(lambda: 1)])]
    )
    await agent.run("go")
    with agent.override(toolsets=[]):
        await agent.run("go")
    assert [names(r) for r in model.requests] == [
        ["extra", "read", "write"],
        ["read", "write"],
        ["write"],
    ]


def test_run_sync_and_sessions_take_toolsets() -> None:
    model = ScriptedModel([call("read", {"path": "p"}), reply("ok"), reply("again")])
    agent = Agent(model)
    run = agent.run_sync("go", toolsets=[files()])
    assert results(run) == [("read p", False)]
    session = agent.session()
    session.run_sync("go", toolsets=[files()])
    assert names(model.requests[-1]) == ["read", "write"]


async def test_a_dynamic_toolset_is_built_once_per_run() -> None:
    built: list[int] = []
    model = ScriptedModel([call("read", {"path": "a"}), reply("ok"), reply("again")])
    agent = Agent(model)

    @agent.toolset
    def per_run(ctx: RunContext[Any]) -> list[Any]:
        built.append(ctx.turn)
        return [read] if ctx.deps == "reader" else [write]

    await agent.run("go", deps="reader")
    await agent.run("go", deps="writer")
    assert built == [0, 0]
    assert [names(r) for r in model.requests] == [["read"], ["read"], ["write"]]


async def test_a_per_step_dynamic_toolset_is_built_per_call() -> None:
    model = ScriptedModel([call("read", {"path": "a"}), reply("ok")])
    ts = DynamicToolset(lambda ctx: [read] if ctx.turn == 0 else files(), per_step=True)
    await Agent(model, toolsets=[ts]).run("go")
    assert [names(r) for r in model.requests] == [["read"], ["read", "write"]]


async def test_a_per_run_dynamic_toolset_that_raises_offers_nothing_all_run() -> None:
    calls: list[int] = []

    def boom(ctx: RunContext[Any]) -> list[Any]:
        calls.append(1)
        raise KeyError("x")

    model = ScriptedModel([call("read", {"path": "a"}), reply("ok")])
    run = await Agent(model, toolsets=[DynamicToolset(boom), FunctionToolset([write])]).run("go")
    assert [names(r) for r in model.requests] == [["write"], ["write"]]
    assert calls == [1]
    assert results(run)[0][0].startswith("tool 'read' is not available")


async def test_a_removed_tool_is_not_available_with_did_you_mean_among_offered() -> None:
    model = ScriptedModel([call("raed", {"path": "a"}), reply("ok")])
    run = await Agent(model, toolsets=[files()]).run("go")
    assert results(run) == [("tool 'raed' is not available. Did you mean 'read'?", True)]


async def test_approval_required_pauses_like_requires_approval() -> None:
    model = ScriptedModel([call("write", {"path": "a", "text": "t"}), reply("ok")])
    run = await Agent(model, toolsets=[files().approval_required()]).run("go")
    assert run.paused and run.pending[0].call.name == "write"


async def test_approval_required_with_a_function_asks_per_call() -> None:
    def risky(ctx: RunContext[Any], spec: ToolSpec, arguments: dict[str, Any]) -> bool:
        return str(arguments.get("path", "")).startswith("/etc")

    model = ScriptedModel(
        [call("read", {"path": "a"}), call("read", {"path": "/etc/x"}), reply("ok")]
    )
    run = await Agent(model, toolsets=[files().approval_required(risky)]).run("go")
    assert results(run)[0] == ("read a", False)
    assert run.paused and run.pending[0].call.arguments == {"path": "/etc/x"}


async def test_a_raising_approval_check_blocks_the_call() -> None:
    def broken(ctx: RunContext[Any], spec: ToolSpec, arguments: dict[str, Any]) -> bool:
        raise LookupError("policy service down")

    model = ScriptedModel([call("read", {"path": "a"}), reply("ok")])
    run = await Agent(model, toolsets=[files().approval_required(broken)]).run("go")
    assert results(run) == [
        ("blocked: approval check failed: LookupError: policy service down", True)
    ]


# -- bad input, hard, before any request ------------------------------------------------------


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda: Agent(ScriptedModel([]), toolsets=[read]), "not a toolset"),  # type: ignore[list-item]
        (lambda: Agent(ScriptedModel([]), toolsets=files()), "must be a list of toolsets"),  # type: ignore[call-overload]
        (lambda: files().prefixed(""), "prefix ''"),
        (lambda: files().prefixed("a b"), "prefix 'a b'"),
        (lambda: files().renamed({"cat": "nope"}), "has no tool named 'nope'"),
        (lambda: files().renamed({"bad name": "read"}), "tool name 'bad name'"),
        (lambda: files().prefixed("x" * 60), "tool name 'x"),
        (
            lambda: FunctionToolset([tool(name="a.b", description="d")(lambda: 1)]),
            "tool name 'a.b'",
        ),
        (
            lambda: Agent(ScriptedModel([]), tools=[read], toolsets=[files()]),
            r"two tools are named 'read' \(toolsets 'tools' and 'files'\); give one a prefix",
        ),
        (
            lambda: Agent(ScriptedModel([]), toolsets=[files(), FunctionToolset([read], name="b")]),
            r"two tools are named 'read' \(toolsets 'files' and 'b'\); give one a prefix",
        ),
    ],
)
def test_bad_toolsets_are_configuration_errors(build: Any, match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        build()


async def test_a_dynamic_collision_is_an_error_at_run_start() -> None:
    model = ScriptedModel([reply("never")])
    agent = Agent(model, toolsets=[files(), DynamicToolset(lambda ctx: [read], name="dyn")])
    with pytest.raises(
        ConfigurationError, match=r"two tools are named 'read' \(toolsets 'files' and 'dyn'\)"
    ):
        await agent.run("go")
    assert model.requests == []


async def test_a_collision_appearing_mid_run_skips_the_newcomer(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def other_read(path: str) -> str:
        return "other"

    other = tool(name="read", description="another read")(other_read)
    ts = DynamicToolset(lambda ctx: [other] if ctx.turn else [], per_step=True, name="late")

    def step(request: ModelRequest) -> Any:
        return call("read", {"path": "a"}) if len(request.messages) == 1 else reply("ok")

    model = FunctionModel(step)
    with caplog.at_level(logging.WARNING, logger="agentloop"):
        run = await Agent(model, toolsets=[files(), ts]).run("go")
    assert results(run) == [("read a", False)]
    assert [s.description for s in model.requests[1].tools if s.name == "read"] == ["Read a file."]
    assert "two tools are named 'read'" in caplog.text


def test_toolsets_is_our_keyword_now() -> None:
    agent = Agent(ScriptedModel([]), toolsets=[files()])
    assert agent is not None


async def test_an_approved_toolset_call_runs_when_the_run_continues() -> None:
    from agentloop.pausing import Approve, Deny

    first, second = (
        call("write", {"path": "a", "text": "t"}),
        call("write", {"path": "b", "text": "t"}),
    )
    model = ScriptedModel([first, second, reply("ok")])
    agent = Agent(model, toolsets=[files().approval_required()])
    run = await agent.run("go")
    run = await agent.continue_run(decisions={run.pending[0].call.id: Approve()})
    assert run.paused
    run = await agent.continue_run(decisions={run.pending[0].call.id: Deny("no")})
    assert results(run)[:2] == [("wrote a", False), ("User denied permission: no", True)]
    assert run.output == "ok"


async def test_a_listed_name_a_provider_refuses_fails_at_run_start() -> None:
    from agentloop.tools import FunctionTool
    from agentloop.toolsets import AbstractToolset, Entry, Scope

    class Listed(AbstractToolset):
        name = "remote"

        async def entries(self, scope: Scope) -> list[Entry]:
            return [Entry.of(FunctionTool(lambda: "x", name="a.b", description="d"), self.name)]

    model = ScriptedModel([reply("never")])
    with pytest.raises(ConfigurationError, match=r"tool name 'a\.b'"):
        await Agent(model, toolsets=[Listed()]).run("go")
    assert model.requests == []


async def test_a_tool_source_of_the_older_protocol_is_a_toolset_too() -> None:
    from collections.abc import Sequence

    from agentloop.tools import Tool

    class Source:
        name, version = "legacy", 0

        async def list_tools(self) -> Sequence[Tool]:
            return [read]

        async def aclose(self) -> None:
            self.version += 1

    model = ScriptedModel([call("src_read", {"path": "a"}), reply("ok")])
    run = await Agent(model, toolsets=[Source()]).run("go")  # type: ignore[list-item]
    assert results(run)[0][0].startswith("tool 'src_read' is not available")
    assert names(model.requests[0]) == ["read"]


async def test_stream_takes_toolsets_for_one_run() -> None:
    model = ScriptedModel([call("read", {"path": "s"}), reply("ok")])
    agent = Agent(model)
    async with agent.stream("go", toolsets=[files()]) as events:
        async for _ in events:
            pass
    assert results(agent.runs[-1]) == [("read s", False)]


def test_pydantic_ais_per_run_step_names_ours() -> None:
    with pytest.raises(TypeError, match="per_step="):
        DynamicToolset(lambda ctx: [], per_run_step=True)  # type: ignore[call-arg]
