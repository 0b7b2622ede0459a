"""The application surface over real sockets: typed output, truncation, streams, run_sync."""

from __future__ import annotations

import asyncio
import json
import sys
import textwrap
from pathlib import Path

from pydantic import BaseModel

from agentloop import Agent, RunConfig, tool
from agentloop import events as ev
from agentloop.providers.anthropic import AnthropicClient
from agentloop.providers.openai import OpenAIClient
from agentloop.testing import FakeProviderServer, FakeReply, FakeToolCall


class Invoice(BaseModel):
    total: float
    currency: str


@tool
def rate(currency: str) -> float:
    """The exchange rate of a currency to EUR."""
    return 1.1


async def test_tool_mode_over_the_openai_adapter_streamed_and_not() -> None:
    for stream in (False, True):
        async with FakeProviderServer(
            [
                FakeReply(tool_calls=[FakeToolCall("rate", {"currency": "USD"})]),
                FakeReply(tool_calls=[FakeToolCall("final_result", {"total": 11})]),
                FakeReply(
                    tool_calls=[FakeToolCall("final_result", {"total": 11, "currency": "EUR"})]
                ),
            ]
        ) as server:
            client = OpenAIClient("m", api_key="k", base_url=server.base_url)
            async with Agent(
                client, output_type=Invoice, tools=[rate], config=RunConfig(stream=stream)
            ) as agent:
                run = await agent.run("bill 10 USD in EUR")
            assert run.output == Invoice(total=11, currency="EUR")
            names = [t["function"]["name"] for t in server.requests[0]["tools"]]
            assert names == ["rate", "final_result"]
            feedback = server.requests[2]["messages"][-1]
            assert feedback["role"] == "tool"
            assert feedback["content"] == "Invalid output: currency: Field required"


async def test_native_mode_sends_response_format_and_reads_the_json_reply() -> None:
    async with FakeProviderServer([FakeReply('{"total": 3, "currency": "EUR"}')]) as server:
        client = OpenAIClient("m", api_key="k", base_url=server.base_url)
        async with Agent(
            client, output_type=Invoice, config=RunConfig(output_mode="native")
        ) as agent:
            run = await agent.run("bill")
    assert run.output == Invoice(total=3, currency="EUR")
    body = server.requests[0]
    assert "tools" not in body
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["name"] == "Invoice"
    assert body["response_format"]["json_schema"]["schema"]["required"] == ["total", "currency"]


async def test_native_mode_falls_back_to_the_tool_on_anthropic() -> None:
    async with FakeProviderServer(
        [FakeReply(tool_calls=[FakeToolCall("final_result", {"total": 1, "currency": "E"})])]
    ) as server:
        client = AnthropicClient("m", api_key="k", base_url=server.root_url)
        agent = Agent(client, output_type=Invoice, config=RunConfig(output_mode="native"))
        run = await agent.run("bill")
        await agent.aclose()
    assert run.output == Invoice(total=1, currency="E")
    assert [t["name"] for t in server.requests[0]["tools"]] == ["final_result"]


async def test_truncation_is_flagged_by_both_adapters() -> None:
    async with FakeProviderServer(
        [FakeReply("cut", finish_reason="length"), FakeReply("cut", finish_reason="length")]
    ) as server:
        openai = OpenAIClient("m", api_key="k", base_url=server.base_url)
        anthropic = AnthropicClient("m", api_key="k", base_url=server.root_url)
        for client in (openai, anthropic):
            async with client:
                run = await Agent(client).run("write a novel")
            assert run.truncated and run.output == "cut"


async def test_stream_over_sse_forwards_tool_call_deltas() -> None:
    async with FakeProviderServer(
        [
            FakeReply(tool_calls=[FakeToolCall("rate", {"currency": "USD"})]),
            FakeReply("one point one"),
        ]
    ) as server:
        client = OpenAIClient("m", api_key="k", base_url=server.base_url)
        async with Agent(client, tools=[rate], config=RunConfig(stream=True)) as agent:
            async with agent.stream("rate?") as events:
                got = [event async for event in events]
    deltas = [e for e in got if isinstance(e, ev.ToolCallDelta)]
    assert deltas and deltas[0].name == "rate"
    assert json.loads("".join(d.arguments_delta for d in deltas)) == {"currency": "USD"}
    assert "".join(e.text for e in got if isinstance(e, ev.TextDelta)) == "one point one"
    assert isinstance(got[-1], ev.RunFinished) and got[-1].run.output == "one point one"


README_LIKE = """
    import sys
    from pydantic import BaseModel
    from agentloop import Agent, Settings, build_client

    class Invoice(BaseModel):
        total: float
        currency: str

    client = build_client(Settings(provider="openai", model="m", api_key="k", base_url=sys.argv[1]))
    agent = Agent(client, output_type=Invoice)
    for _ in range(3):
        print(agent.run_sync("bill").output)
"""


async def test_a_script_using_run_sync_exits_cleanly(tmp_path: Path) -> None:
    script = tmp_path / "app.py"
    script.write_text(textwrap.dedent(README_LIKE))
    answer = FakeReply(tool_calls=[FakeToolCall("final_result", {"total": 2, "currency": "E"})])
    async with FakeProviderServer([answer, answer, answer]) as server:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-W",
            "default",
            str(script),
            server.base_url,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        stdout, stderr = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, stderr.decode()
    assert stderr.decode() == ""
    assert stdout.decode().splitlines() == ["total=2.0 currency='E'"] * 3
