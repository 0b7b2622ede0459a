"""SPEC 28's goal where it meets the other features, on the twin of an append-only Claude.

Memory (the memory tool and auto recall, SPEC 27), toolsets changing their tools mid-run and
local tool search loading a tool (22), a handoff to a receiver with other instructions and
tools (26, with and without an input filter) and a provider tool (web search, 24): each runs
several turns over 3 runs with no request refused for a changed prefix, and the top-level
``system`` and ``tools`` are the same bytes on every request (the changes travel as entries).
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from agentloop import Agent, Approve, RunConfig, RunContext, handoff, tool
from agentloop.handoffs import remove_tool_calls
from agentloop.memory import InMemoryMemoryStore, Memory
from agentloop.model import ModelSettings, ToolSpec
from agentloop.provider_tools import WebSearch
from agentloop.providers.settings import Settings, build_client
from agentloop.testing import ScriptedModel, call
from agentloop.toolsets import FunctionToolset

from .twins import anthropic as twin
from .twins import anthropic_server_tools as st
from .twins.anthropic import AnthropicTwin, TwinReply

KEY = "sk-ant-twin-0123456789"
MODEL = "claude-fable-5-1"
CONFIG = RunConfig(model_settings=ModelSettings(reasoning_effort="low"))


@tool
def read(page: int) -> str:
    """Read a page."""
    return f"page {page}"


def step(run: int, n: int, name: str, arguments: dict[str, Any]) -> TwinReply:
    return TwinReply([twin.thinking(f"r{run} s{n}"), twin.tool_use(name, arguments)], "tool_use")


def pages(run: int, n: int) -> list[TwinReply]:
    """``n`` more tool turns (``read``): the runs reach SPEC 28's 20 turns."""
    return [step(run, 10 + i, "read", {"page": i}) for i in range(n)]


def answer(text: str) -> TwinReply:
    return TwinReply([twin.thinking(f"answering {text}"), twin.text(text)])


def client_of(server: AnthropicTwin) -> Any:
    return build_client(
        Settings(provider="anthropic", model=MODEL, api_key=KEY, base_url=server.url)
    )


def encoded(body: dict[str, Any], key: str) -> str:
    return json.dumps(body.get(key), sort_keys=True)


def same_base(server: AnthropicTwin) -> None:
    """No prefix failure over 20 requests; one ``system`` and one ``tools`` across them all."""
    assert server.rejected == [] and len(server.requests) == 20
    assert len({encoded(b, "system") for b in server.requests}) == 1
    assert len({encoded(b, "tools") for b in server.requests}) == 1


def system_entries(body: dict[str, Any]) -> list[Any]:
    return [m for m in body["messages"] if m["role"] == "system"]


def user(ctx: Any) -> tuple[str, ...]:
    return ("user", "ada")


async def test_memory_recall_and_the_memory_tool_over_three_runs() -> None:
    store = InMemoryMemoryStore()
    await store.put(("user", "ada"), "ada likes tea")
    await store.put(("user", "ada"), "ada lives in paris")
    create = {"command": "create", "path": "/memories/books", "file_text": "ada reads novels"}
    script = [
        step(1, 0, "read", {"page": 1}),
        step(1, 1, "memory", create),
        answer("one"),
        step(2, 0, "memory", {"command": "view", "path": "/memories"}),
        answer("two"),
        step(3, 0, "read", {"page": 3}),
        *pages(3, 13),
        answer("three"),
    ]
    async with AnthropicTwin(script) as server:
        agent = Agent(
            client_of(server),
            instructions="You remember.",
            tools=[read],
            memory=Memory(store, namespace=user, auto_recall=3),
            config=CONFIG,
        )
        runs = [await agent.run(q) for q in ("tea please", "where is paris", "novels and tea")]
    assert [r.output for r in runs] == ["one", "two", "three"]
    same_base(server)
    first = server.requests[0]
    assert "Memories from earlier" not in encoded(first, "system")  # never in the base
    recalls = [
        [e for e in system_entries(b) if "Memories from earlier" in json.dumps(e)]
        for b in server.requests
    ]
    assert all(recalls)  # every request carries its run's recall as an entry
    assert "ada likes tea" in json.dumps(recalls[0][-1])
    assert "ada lives in paris" in json.dumps(recalls[3][-1])
    assert "ada reads novels" in json.dumps(recalls[5][-1])  # run 1's memory, recalled in run 3
    history = agent.history
    assert history[0].role == "system" and "Memories" not in (history[0].text or "")


@tool
def refund(order: str) -> str:
    """Refund an order."""
    return f"refunded {order}"


def triage_and_billing(server: AnthropicTwin, **billing_options: Any) -> Agent[Any]:
    client = client_of(server)
    billing = Agent(
        client, name="billing", instructions="You handle billing.", tools=[refund], config=CONFIG
    )
    target = handoff(billing, **billing_options)
    return Agent(client, instructions="You route.", tools=[read], handoffs=[target], config=CONFIG)


HANDOFF_SCRIPT = [
    step(1, 0, "read", {"page": 1}),
    step(1, 1, "transfer_to_billing", {}),
    step(1, 2, "refund", {"order": "A1"}),
    step(1, 3, "refund", {"order": "A2"}),
    answer("refunded"),
    step(2, 0, "read", {"page": 2}),
    answer("two"),
    step(3, 0, "read", {"page": 3}),
    *pages(3, 11),
    answer("three"),
]


async def test_a_handoff_to_a_receiver_with_other_instructions_and_tools() -> None:
    async with AnthropicTwin(list(HANDOFF_SCRIPT)) as server:
        agent = triage_and_billing(server)
        runs = [await agent.run(q) for q in ("refund A1 and A2", "page two", "page three")]
    assert [r.output for r in runs] == ["refunded", "two", "three"]
    assert runs[0].last_agent == "billing" and runs[1].last_agent is None
    same_base(server)  # the receiver's instructions and tools travel as entries
    after = system_entries(server.requests[2])
    assert "You handle billing." in json.dumps(after)
    assert "refund" in json.dumps(after[-1]) or "refund" in json.dumps(after)
    back = system_entries(server.requests[5])  # run 2: the session's own agent again
    assert "You route." in json.dumps(back[-1]) or "You route." in json.dumps(back)


async def test_a_filtered_handoff_is_a_new_conversation_with_the_receivers_base() -> None:
    async with AnthropicTwin(list(HANDOFF_SCRIPT)) as server:
        agent = triage_and_billing(server, input_filter=remove_tool_calls)
        runs = [await agent.run(q) for q in ("refund A1 and A2", "page two", "page three")]
    assert [r.output for r in runs] == ["refunded", "two", "three"]
    assert server.rejected == [] and len(server.requests) == 20
    requests = server.requests
    triage_system = encoded(requests[0], "system")
    billing = requests[2:5]  # the receiver's requests: its own base, the filter's view
    assert {encoded(b, "system") for b in billing} == {encoded(billing[0], "system")}
    assert "You handle billing." in encoded(billing[0], "system")
    assert [t["name"] for t in billing[0]["tools"]] == ["refund"]
    first = billing[0]["messages"][0]
    assert first["role"] == "user" and "refund A1 and A2" in json.dumps(first)  # nothing cut
    assert not any(m["role"] == "system" for m in billing[0]["messages"])
    assert "tool_use" not in json.dumps(billing[0]["messages"])  # the filter removed the calls
    later = requests[5:]  # runs 2 and 3: the session's conversation again, its base unchanged
    assert {encoded(b, "system") for b in later} == {triage_system}
    assert {encoded(b, "tools") for b in later} == {encoded(requests[0], "tools")}
    assert agent.history[0].role == "system"  # committed history keeps every message
    assert any("refunded A2" in json.dumps(m.to_dict()) for m in agent.history)


files = FunctionToolset(name="files")


@files.tool
def look(path: str) -> str:
    """Look at a file."""
    return f"contents of {path}"


@files.tool
def erase(path: str) -> str:
    """Erase a file."""
    return f"erased {path}"


def late_erase(ctx: RunContext[Any], spec: ToolSpec) -> bool:
    return spec.name != "erase" or ctx.turn >= 2  # the tool list changes mid-run


@tool(defer_loading=True)
def archive(path: str) -> str:
    """Archive a file into cold storage."""
    return f"archived {path}"


async def test_toolsets_changing_their_tools_and_tool_search_loading_one() -> None:
    script = [
        step(1, 0, "look", {"path": "a"}),
        step(1, 1, "search_tools", {"query": "archive cold storage", "limit": 1}),
        step(1, 2, "erase", {"path": "a"}),
        step(1, 3, "archive", {"path": "b"}),
        answer("one"),
        step(2, 0, "look", {"path": "c"}),
        step(2, 1, "archive", {"path": "c"}),
        step(2, 2, "erase", {"path": "c"}),
        answer("two"),
        step(3, 0, "look", {"path": "d"}),
        *pages(3, 9),
        answer("three"),
    ]
    async with AnthropicTwin(script) as server:
        agent = Agent(
            client_of(server),
            instructions="You keep files.",
            tools=[archive, read],
            toolsets=[files.filtered(late_erase)],
            config=replace(CONFIG, tool_search="local"),  # native search has its own test
        )
        runs = [await agent.run(q) for q in ("a and b", "c", "d")]
    assert [r.output for r in runs] == ["one", "two", "three"]
    assert runs[0].loaded_tools == ["archive"]
    results = [p.content for t in runs[0].turns for p in t.tool_results]
    assert results[2:4] == ["erased a", "archived b"]
    same_base(server)
    changes = [json.dumps(system_entries(b)) for b in server.requests]
    assert "erase" not in encoded(server.requests[0], "tools")
    assert '"archive"' in changes[3] and '"erase"' in changes[3]  # entries, not a new base


async def test_the_memory_tools_on_an_append_only_conversation() -> None:
    store = InMemoryMemoryStore()
    script = [
        step(1, 0, "remember", {"text": "ada likes green tea"}),
        answer("one"),
        step(2, 0, "recall", {"query": "tea"}),
        answer("two"),
        step(3, 0, "recall", {"query": "tea"}),
        *pages(3, 14),
        answer("three"),
    ]
    memory = Memory(store, namespace=user, auto_recall=2, anthropic_tool=False)
    async with AnthropicTwin(script) as server:
        agent = Agent(
            client_of(server),
            instructions="You remember.",
            tools=[read],
            memory=memory,
            config=CONFIG,
        )
        runs = [await agent.run(q) for q in ("tea", "green tea", "more tea")]
    assert [r.output for r in runs] == ["one", "two", "three"]
    assert runs[1].turns[0].tool_results[0].content.endswith("ada likes green tea")
    same_base(server)
    assert await store.count(("user", "ada")) == 1


async def test_a_provider_tool_web_search_over_three_runs() -> None:
    def searched(run: int) -> TwinReply:
        call_id = f"srvtoolu_{run}"
        return TwinReply(
            [
                twin.thinking(f"search {run}"),
                st.server_tool_use("web_search", {"query": f"q{run}"}, call_id),
                st.web_search_result(call_id, [(f"https://{run}.example", f"R{run}")]),
                st.cited_text(f"R{run} says so.", f"https://{run}.example", f"R{run}"),
            ]
        )

    script = [
        step(1, 0, "read", {"page": 1}),
        searched(1),
        step(2, 0, "read", {"page": 2}),
        searched(2),
        *pages(3, 15),
        searched(3),
    ]
    async with AnthropicTwin(script) as server:
        agent = Agent(
            client_of(server),
            instructions="You search.",
            tools=[read],
            provider_tools=[WebSearch(max_uses=2)],
            config=CONFIG,
        )
        runs = [await agent.run(q) for q in ("one", "two", "three")]
    assert [r.output for r in runs] == ["R1 says so.", "R2 says so.", "R3 says so."]
    same_base(server)


async def test_an_append_only_receiver_makes_the_whole_conversation_append_only() -> None:
    script = [
        step(1, 0, "refund", {"order": "A1"}),
        answer("one"),
        step(2, 0, "refund", {"order": "A2"}),
        answer("two"),
    ]
    async with AnthropicTwin(script) as server:
        billing = Agent(
            client_of(server),
            name="billing",
            instructions="You handle billing.",
            tools=[refund],
            config=CONFIG,
        )
        router = ScriptedModel([call("transfer_to_billing", {}), call("transfer_to_billing", {})])
        triage = Agent(router, instructions="You route.", tools=[read], handoffs=[billing])
        runs = [await triage.run(q) for q in ("refund A1", "refund A2")]
    assert [r.output for r in runs] == ["one", "two"]
    assert server.rejected == []
    assert triage.history[0].role == "system"  # the conversation opened with its base
    assert router.requests[0].system == "You route."  # the starting agent's base
    assert len({encoded(b, "system") for b in server.requests}) == 1
    assert len({encoded(b, "tools") for b in server.requests}) == 1


async def test_a_paused_filtered_receiver_goes_on_in_its_own_conversation() -> None:
    @tool(requires_approval=True)
    def cancel_plan(plan: str) -> str:
        """Cancel a plan."""
        return f"cancelled {plan}"

    script = [
        step(1, 0, "read", {"page": 1}),
        step(1, 1, "transfer_to_billing", {}),
        TwinReply(
            [twin.thinking("cancel"), twin.tool_use("cancel_plan", {"plan": "pro"}, "toolu_c1")],
            "tool_use",
        ),
        step(1, 3, "cancel_plan", {"plan": "basic"}),
        answer("gone"),
        step(2, 0, "read", {"page": 2}),
        answer("two"),
    ]
    async with AnthropicTwin(script) as server:
        client = client_of(server)
        billing = Agent(
            client, name="billing", instructions="You bill.", tools=[cancel_plan], config=CONFIG
        )
        target = handoff(billing, input_filter=remove_tool_calls)
        agent = Agent(
            client,
            instructions=lambda ctx: "You route.",
            tools=[read],
            handoffs=[target],
            config=CONFIG,
        )
        paused = await agent.run("cancel my plans")
        assert paused.paused
        first = await agent.continue_run(decisions={"toolu_c1": Approve()})
        assert first.paused
        done = await agent.continue_run(decisions={first.pending[0].id: Approve()})
        again = await agent.run("page two")
    assert done.output == "gone" and again.output == "two"
    assert server.rejected == []
    billing_requests = server.requests[2:5]
    assert {encoded(b, "system") for b in billing_requests} == {
        encoded(billing_requests[0], "system")
    }
    assert "You bill." in encoded(billing_requests[0], "system")
    assert {encoded(b, "system") for b in server.requests[5:]} == {
        encoded(server.requests[0], "system")
    }
