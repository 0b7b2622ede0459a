"""The agent's other model requests wait for its governor too (SPEC 25 x 7 x 6), over real HTTP.

``Agent(governor=...)`` governs "every HTTP request of the agent's client" (docs/fleet.md), but
the agent governs a copy of its client: a ``SummarizingCompactor`` or an ``LLMReflector`` built
with the same client (the usual way: one client per provider) still held the ungoverned one.
Its summaries and analyses went to the provider around the fleet's limits: more requests in a
window than ``rpm`` allows, and a 429 on them closed no key for the rest of the fleet (a long
conversation's compaction then failed with ``CompactionFailed``). Now the agent's compactor and
reflector take a governed copy of their client. A fake provider server on 127.0.0.1, the
governor on a fake clock (each wait is recorded, nothing sleeps).
"""

from __future__ import annotations

import pytest

from agentloop import Agent, RunConfig, handoff, tool
from agentloop.context import SummarizingCompactor
from agentloop.errors import BudgetExhausted, ToolError
from agentloop.fleet import RateGovernor, RateLimit, govern
from agentloop.guardrails import GuardrailContext, InputGuardrail
from agentloop.messages import Message
from agentloop.model import ModelRequest
from agentloop.providers.openai import OpenAIClient
from agentloop.safety import Budget, ExponentialBackoffRecovery, LLMReflector
from agentloop.testing import FakeClock, FakeProviderServer, FakeReply, FakeToolCall

pytestmark = pytest.mark.usefixtures("no_real_sleep")

WAIT = 60.25  # rpm=1: the next request waits a window (and the governor's quarter second)


@tool
def page(n: int) -> str:
    """Read a page of the manual."""
    return f"page {n}: " + "lorem ipsum " * 70


def openai(server: FakeProviderServer) -> OpenAIClient:
    return OpenAIClient("gpt-test", api_key="sk-test", base_url=server.base_url, provider="openai")


async def test_a_summarizing_compactor_on_the_agents_client_waits_for_the_governor() -> None:
    clock = FakeClock()
    governor = RateGovernor([RateLimit("openai", rpm=1)], clock=clock)
    pages = [FakeReply(tool_calls=[FakeToolCall("page", {"n": n})]) for n in range(1, 5)]
    steps = [*pages, FakeReply("the first pages are filler"), FakeReply("done")]  # a summary
    async with FakeProviderServer(steps) as server:
        client = openai(server)
        compactor = SummarizingCompactor(
            client, preserve_recent=2, min_messages=3, max_summary_tokens=50,
            max_request_tokens=4_000,
        )  # fmt: skip
        config = RunConfig(context_window=1_000, compactor=compactor)
        agent = Agent(client, tools=[page], governor=governor, clock=clock, config=config)
        run = await agent.run("summarise the manual")
        sent = len(server.received)
    assert run.output == "done" and sent == 6
    summary = [m for m in run.conversation if "Summary of earlier conversation" in m.text]
    assert summary, "the compactor summarised"
    assert clock.sleeps == pytest.approx([WAIT] * 5)  # every request after the first waited
    assert agent.config.compactor is not compactor  # a governed copy; the user's is untouched
    assert compactor.client is client


@tool
def flaky(path: str) -> str:
    """Read a file."""
    raise ToolError(f"no such file: {path}")


async def test_an_llm_reflector_on_the_agents_client_waits_for_the_governor() -> None:
    clock = FakeClock()
    governor = RateGovernor([RateLimit("openai", rpm=1)], clock=clock)
    analysis = '{"is_recoverable": false, "root_cause": "missing", "severity": "low"}'
    steps = [
        FakeReply(tool_calls=[FakeToolCall("flaky", {"path": "a"})]),
        FakeReply(analysis),  # the reflector's analysis
        FakeReply("gave up"),
    ]
    async with FakeProviderServer(steps) as server:
        client = openai(server)
        reflector = LLMReflector(client)
        config = RunConfig(reflector=reflector, recovery=ExponentialBackoffRecovery(max_retries=1))
        agent = Agent(client, tools=[flaky], governor=governor, clock=clock, config=config)
        run = await agent.run("read a")
        sent = len(server.received)
    assert run.output == "gave up" and sent == 3
    assert clock.sleeps == pytest.approx([WAIT] * 2)
    assert reflector.client is client


async def test_a_child_agent_run_as_a_tool_waits_for_its_parents_governor() -> None:
    """An agent as a tool (SPEC 13) without a governor of its own is governed as its parent is.

    A handoff's receiver already passes the starting agent's governor (SPEC 26); a child run by
    ``as_tool()`` did not, so a delegating parent's children (the usual agents-as-tools fleet,
    one client for all) sent around the limits. The grandchild too: it waits for the governor
    its parent's requests wait for.
    """
    clock = FakeClock()
    governor = RateGovernor([RateLimit("openai", rpm=1)], clock=clock)
    steps = [
        FakeReply(tool_calls=[FakeToolCall("researcher", {"input": "dig"})]),  # the parent
        FakeReply(tool_calls=[FakeToolCall("archivist", {"input": "find"})]),  # the child
        FakeReply("found it"),  # the grandchild
        FakeReply("it is found"),  # the child
        FakeReply("done"),  # the parent
    ]
    async with FakeProviderServer(steps) as server:
        client = openai(server)
        archivist = Agent(client, name="archivist")
        helper = archivist.as_tool(name="archivist", description="Finds records.")
        researcher = Agent(client, name="researcher", tools=[helper])
        tool = researcher.as_tool(name="researcher", description="Researches.")
        parent = Agent(client, tools=[tool], governor=governor, clock=clock)
        run = await parent.run("research it")
        sent = len(server.received)
    assert run.output == "done" and sent == 5
    assert clock.sleeps == pytest.approx([WAIT] * 4)
    assert researcher.client is client and researcher.governor is None  # untouched


async def test_a_child_with_its_own_governor_keeps_it() -> None:
    clock = FakeClock()
    parents = RateGovernor([RateLimit("openai", rpm=1)], clock=clock)
    own = RateGovernor([RateLimit("openai", rpm=1_000)], clock=clock)
    steps = [
        FakeReply(tool_calls=[FakeToolCall("researcher", {"input": "dig"})]),
        FakeReply("found"),
        FakeReply("done"),
    ]
    async with FakeProviderServer(steps) as server:
        client = openai(server)
        researcher = Agent(client, name="researcher", governor=own, clock=clock)
        tool = researcher.as_tool(name="researcher", description="Researches.")
        parent = Agent(client, tools=[tool], governor=parents, clock=clock)
        assert (await parent.run("research it")).output == "done"
    assert clock.sleeps == pytest.approx([WAIT])  # the parent's second request only


async def test_a_childs_wait_past_its_parents_wall_clock_is_refused_at_once() -> None:
    """SPEC 25: a wait that would outlast the run's remaining wall clock is ``BudgetExhausted``
    at once, nothing sent. A child's line is its parent's too (SPEC 13), but the governor read
    only the child's own budget: the child waited a whole window past the parent's line, sent
    its request, and only the parent's next request was refused."""
    clock = FakeClock()
    governor = RateGovernor([RateLimit("openai", rpm=1)], clock=clock)
    steps = [FakeReply(tool_calls=[FakeToolCall("researcher", {"input": "dig"})]), FakeReply("x")]
    async with FakeProviderServer(steps) as server:
        client = openai(server)
        researcher = Agent(client, name="researcher", clock=clock)
        tool = researcher.as_tool(name="researcher", description="Researches.")
        config = RunConfig(budget=Budget(wall_clock=30.0))
        parent = Agent(client, tools=[tool], governor=governor, clock=clock, config=config)
        with pytest.raises(BudgetExhausted):
            await parent.run("research it")
        sent = len(server.received)
    assert clock.sleeps == [] and sent == 1  # the child's request neither waited nor went
    run = parent.current_run
    assert run is not None
    [result] = [p for m in run.messages for p in m.tool_results_parts]
    assert result.content.startswith("agent 'researcher' stopped: BudgetExhausted: ")


async def test_a_handoff_inside_a_governed_child_stays_governed() -> None:
    """The child (governed as its parent is) hands off: its receiver's requests wait too."""
    clock = FakeClock()
    governor = RateGovernor([RateLimit("openai", rpm=1)], clock=clock)
    steps = [
        FakeReply(tool_calls=[FakeToolCall("desk", {"input": "refund A1"})]),  # the parent
        FakeReply(tool_calls=[FakeToolCall("transfer_to_billing", {})]),  # the child
        FakeReply("refunded"),  # the child's receiver
        FakeReply("done"),  # the parent
    ]
    async with FakeProviderServer(steps) as server:
        client = openai(server)
        billing = Agent(client, name="billing")
        desk = Agent(client, name="desk", handoffs=[handoff(billing)])
        tool = desk.as_tool(name="desk", description="The front desk.")
        parent = Agent(client, tools=[tool], governor=governor, clock=clock)
        run = await parent.run("refund A1")
        sent = len(server.received)
    assert run.output == "done" and sent == 4
    assert clock.sleeps == pytest.approx([WAIT] * 3)


async def test_a_guardrails_metered_client_waits_for_the_agents_governor() -> None:
    """A guardrail that asks its own judge model (``ctx.metered(judge)``, SPEC 19) sent around
    the fleet's limits: the judge is another client object, which the agent does not govern.
    Now its requests wait for the governor the run's client waits for; ``ctx.client`` (the
    agent's own, governed) is not wrapped twice, and a judge governed by another governor keeps
    it."""
    clock = FakeClock()
    governor = RateGovernor([RateLimit("openai", rpm=1)], clock=clock)
    verdicts: list[str] = []

    async def judged(ctx: GuardrailContext[None], value: str) -> str | None:
        reply = await ctx.metered(judge).complete(ModelRequest([Message.user(value)]))
        verdicts.append(reply.message.text)
        return None if reply.message.text == "safe" else "unsafe"

    async with FakeProviderServer([FakeReply("safe"), FakeReply("hello")]) as server:
        client, judge = openai(server), openai(server)
        guard = InputGuardrail(judged)
        agent = Agent(client, guardrails=[guard], governor=governor, clock=clock)
        run = await agent.run("hi")
        sent = len(server.received)
    assert run.output == "hello" and verdicts == ["safe"] and sent == 2
    assert clock.sleeps == pytest.approx([WAIT])  # the second request waited a window
    turns = sum(t.usage.input_tokens for t in run.turns)
    assert run.usage.input_tokens > turns  # the judge's reply counted in the run (metered)


async def test_a_guardrails_judge_with_its_own_governor_keeps_it() -> None:
    clock = FakeClock()
    agents = RateGovernor([RateLimit("openai", rpm=1)], clock=clock)
    own = RateGovernor([RateLimit("openai", rpm=1_000)], clock=clock)

    async def judged(ctx: GuardrailContext[None], value: str) -> str | None:
        await ctx.metered(judge).complete(ModelRequest([Message.user(value)]))
        return None

    async with FakeProviderServer([FakeReply("safe"), FakeReply("hello")]) as server:
        client = openai(server)
        judge = govern(openai(server), own)
        agent = Agent(client, guardrails=[InputGuardrail(judged)], governor=agents, clock=clock)
        assert (await agent.run("hi")).output == "hello"
    assert clock.sleeps == []  # each governor saw one request
