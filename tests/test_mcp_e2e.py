"""End to end: real HTTP to the fake provider, real MCP servers, a sub-agent, in one run.

The reference filesystem server (``@modelcontextprotocol/server-filesystem``, Node) comes from
the local npm install ``make test`` makes under ``.ci/node``. Without it the test fails, telling
how to install it; ``AGENTLOOP_SKIP_NPM=1`` lets it skip on a machine without Node.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from agentloop import Agent, Observer, RunConfig
from agentloop import events as ev
from agentloop.mcp import MCPServer
from agentloop.messages import Usage
from agentloop.providers import OpenAIClient
from agentloop.run import Run
from agentloop.testing import (
    FakeProviderServer,
    FakeReply,
    FakeToolCall,
    ScriptedModel,
    call,
    reply,
)

ROOT = Path(__file__).resolve().parent.parent
FAULTY = Path(__file__).parent / "mcp_servers" / "faulty.py"
FILESYSTEM = ROOT / ".ci/node/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"


def _all_children() -> list[int]:
    """Every child process of this test process, live or not yet reaped."""
    found: list[int] = []
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        try:
            found += [int(pid) for pid in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


_OLDER: set[int] = set()


@pytest.fixture(autouse=True)
def _older_children() -> None:
    """Child processes older than the test (a session fixture's servers) are not the test's."""
    _OLDER.clear()
    _OLDER.update(_all_children())


def children() -> list[int]:
    """The child processes of this test process started during the test, live or not reaped."""
    return [pid for pid in _all_children() if pid not in _OLDER]


def results(run: Run[Any]) -> list[tuple[str, bool]]:
    return [(p.content, p.is_error) for m in run.messages for p in m.tool_results_parts]


def tool_messages(body: Mapping[str, Any]) -> list[str]:
    """The tool results an OpenAI request body carries, in order."""
    return [m["content"] for m in body["messages"] if m["role"] == "tool"]


async def test_one_run_uses_an_mcp_tool_and_a_sub_agent_over_the_openai_adapter(
    tmp_path: Path,
) -> None:
    events: list[ev.Event] = []

    class Collect(Observer):
        def on_event(self, event: ev.Event) -> None:
            events.append(event)

    script = [
        FakeReply(  # the parent: the MCP tool and the sub-agent in one reply
            "Let me check.",
            tool_calls=[
                FakeToolCall("mcp_add", {"a": 2, "b": 40}),
                FakeToolCall("researcher", {"input": "Why 42?"}),
            ],
        ),
        FakeReply(tool_calls=[FakeToolCall("mcp_echo", {"text": "deep thought"})]),  # the child
        FakeReply("It is what deep thought said.", input_tokens=20, output_tokens=8),  # the child
        FakeReply("42, says deep thought."),  # the parent's answer
    ]
    server = MCPServer.stdio(
        sys.executable,
        [str(FAULTY)],
        env={"MARKER_DIR": str(tmp_path)},
        name="faulty",
        prefix="mcp",
    )
    async with FakeProviderServer(script) as fake:
        child_client = OpenAIClient("fake-model", base_url=fake.base_url, api_key="test")
        parent_client = OpenAIClient("fake-model", base_url=fake.base_url, api_key="test")
        child = Agent(child_client, tools=[server], system="You research.")
        researcher = child.as_tool(name="researcher", description="Researches a question.")
        async with (
            child,
            Agent(
                parent_client,
                tools=[server, researcher],
                observers=[Collect()],
                config=RunConfig(stream=True),
            ) as parent,
        ):
            run = await parent.run("What is 2 + 40, and why?")
        bodies = fake.requests
    assert run.output == "42, says deep thought." and run.stop_reason is None
    assert results(run) == [("42", False), ("It is what deep thought said.", False)]
    # the child's requests: its own conversation (system prompt, the input), then its tool result
    assert [m["role"] for m in bodies[1]["messages"]] == ["system", "user"]
    assert bodies[1]["messages"][1]["content"] == "Why 42?"
    assert tool_messages(bodies[2]) == ["deep thought"]
    assert tool_messages(bodies[3]) == ["42", "It is what deep thought said."]
    assert {"mcp_add", "mcp_echo", "researcher"} <= {
        t["function"]["name"] for t in bodies[0]["tools"]
    }
    # usage rolled up: the parent's two replies and the child's two
    assert run.usage == Usage(10 + 10 + 20 + 10, 5 + 5 + 8 + 5)
    paths = {e.path for e in events}
    assert paths == {(), ("researcher",)}
    child_calls = [e for e in events if isinstance(e, ev.ToolCallFinished) and e.path]
    assert [e.call.name for e in child_calls] == ["mcp_echo"]
    assert children() == []


# -- the reference filesystem server (Node, from the local npm install) --------------------------


def require_filesystem_server() -> None:
    """Fail (in CI) or skip (``AGENTLOOP_SKIP_NPM=1``) when the npm install is missing."""
    if not FILESYSTEM.exists() or shutil.which("node") is None:
        if os.environ.get("AGENTLOOP_SKIP_NPM") == "1":
            pytest.skip("AGENTLOOP_SKIP_NPM=1 and the npm filesystem server is not installed")
        pytest.fail(
            f"{FILESYSTEM.relative_to(ROOT)} is missing (or node is): run make test, or "
            "npm install --prefix .ci/node @modelcontextprotocol/server-filesystem "
            "(AGENTLOOP_SKIP_NPM=1 skips this test)"
        )


def filesystem_server(root: Path) -> MCPServer:
    require_filesystem_server()
    return MCPServer.stdio("node", [str(FILESYSTEM), str(root)], name="fs", prefix="fs")


async def test_the_reference_filesystem_server_through_an_agent(tmp_path: Path) -> None:
    root = (tmp_path / "files").resolve()
    root.mkdir()
    (root / "notes.txt").write_text("buy milk\n")
    model = ScriptedModel(
        [
            call("fs_list_directory", {"path": str(root)}),
            call("fs_read_text_file", {"path": str(root / "notes.txt")}),
            call("fs_write_file", {"path": str(root / "done.txt"), "content": "milk bought"}),
            call("fs_read_text_file", {"path": "/etc/hostname"}),
            call("fs_read_text_file", {"pth": "typo"}),
            reply("done"),
        ]
    )
    async with Agent(model, tools=[filesystem_server(root)]) as agent:
        run = await agent.run("tidy my notes")
    listing, read, wrote, outside, typo = results(run)
    assert listing == ("[FILE] notes.txt", False)
    assert read == ("buy milk\n", False)
    assert (root / "done.txt").read_text() == "milk bought"
    assert wrote == (f"Successfully wrote to {root / 'done.txt'}", False)
    assert outside == (
        f"Access denied - path outside allowed directories: /etc/hostname not in {root}",
        True,
    )
    assert typo == ("Invalid arguments for tool 'fs_read_text_file': path: Field required", True)
    assert run.output == "done"
    assert children() == []


def test_the_npm_install_is_pinned() -> None:
    """``make test`` installs one exact version, and that is the one installed."""
    ci = (ROOT / "Makefile").read_text()
    pinned = ci.split("@modelcontextprotocol/server-filesystem@")[1].split()[0].strip("\"'")
    require_filesystem_server()
    package = json.loads((FILESYSTEM.parent.parent / "package.json").read_text())
    assert package["version"] == pinned
