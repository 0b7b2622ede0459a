"""MCP servers as tool sources, over real servers in subprocesses (tests/mcp_servers/faulty.py).

The fault matrix of SPEC 13: isError, JSON-RPC errors, bad arguments, crashes (soft, sick,
restarted with backoff), timeouts (the server sees the cancel), list changes, start-up failures,
streamable HTTP, and process hygiene (aclose, cancelled runs, a SIGKILLed parent).
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mcp.types as types
import pytest

from agentloop import Agent, RunConfig, tool
from agentloop.cancel import CancelToken
from agentloop.errors import Cancelled, ConfigurationError, ToolError
from agentloop.mcp import MCPServer, restart_delay
from agentloop.run import Run
from agentloop.testing import ScriptedModel, call, reply
from agentloop.tools import Tool, ToolContext

SERVER = Path(__file__).parent / "mcp_servers" / "faulty.py"
UNAVAILABLE = "tool server 'faulty' is unavailable: "


def faulty(markers: Path, **options: Any) -> MCPServer:
    env = {"MARKER_DIR": str(markers), **options.pop("env", {})}
    return MCPServer.stdio(sys.executable, [str(SERVER)], env=env, name="faulty", **options)


def results(run: Run[Any]) -> list[tuple[str, bool]]:
    return [(p.content, p.is_error) for m in run.messages for p in m.tool_results_parts]


def alive(pid: int) -> bool:
    """Running (a zombie waiting for a reaper that is not us has exited)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def our_servers() -> list[int]:
    """Live child processes of this test process running the faulty server."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(status.split("PPid:")[1].split()[0])
        if ppid == os.getpid() and b"faulty.py" in cmdline and alive(int(entry.name)):
            found.append(int(entry.name))
    return found


async def eventually(check: Callable[[], bool], seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True


async def tools_of(server: MCPServer) -> dict[str, Tool]:
    return {t.name: t for t in await server.list_tools()}


# -- tools through an agent --------------------------------------------------------------------


async def test_tools_are_listed_with_a_prefix_and_called_through_an_agent(tmp_path: Path) -> None:
    @tool
    def local() -> str:
        """A plain tool beside the server."""
        return "local"

    model = ScriptedModel(
        [
            call("fs_echo", {"text": "hi"}),
            call("fs_add", {"a": 2, "b": 3}),
            call("local"),
            reply("ok"),
        ]
    )
    async with Agent(model, tools=[local, faulty(tmp_path, prefix="fs")]) as agent:
        run = await agent.run("go")
    advertised = [spec.name for spec in model.requests[0].tools]
    assert {"local", "fs_echo", "fs_add", "fs_crash"} <= set(advertised)
    assert results(run) == [("hi", False), ("5", False), ("local", False)]
    assert our_servers() == []


async def test_soft_results_errors_and_content(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            call("refuse", {"why": "no"}),
            call("protocol_error"),
            call("add", {"a": "seven", "c": 1}),
            call("picture"),
            call("weather", {"city": "Oslo"}),
            call("big", {"size": 100_000}),
            reply("done"),
        ]
    )
    config = RunConfig(max_tool_output_chars=500)
    async with Agent(model, tools=[faulty(tmp_path)], config=config) as agent:
        run = await agent.run("go")
    got = results(run)
    assert got[0] == ("Error executing tool refuse: refused: no", True)  # isError, verbatim
    assert got[1] == ("backend quota exceeded", True)  # the JSON-RPC error's message
    # checked against the listed schema here (the server's own check reads differently)
    assert got[2] == (
        "Invalid arguments for tool 'add': a: 'seven' is not of type 'integer'; b: Field required",
        True,
    )
    assert got[3] == ("", False)  # an image travels as a media part, not a placeholder
    [picture] = run.turns[3].tool_results[0].media
    assert (picture.kind, picture.media_type) == ("image", "image/png")
    assert picture.data == b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"
    assert got[4][0].replace(" ", "").replace("\n", "") == '{"city":"Oslo","celsius":21}'
    assert len(got[5][0]) <= 500 and got[5][0].startswith("xxx") and not got[5][1]


# -- crashes, restarts, backoff, the breaker ---------------------------------------------------


async def test_a_crash_mid_call_is_unavailable_and_the_next_call_restarts(tmp_path: Path) -> None:
    model = ScriptedModel([call("pid"), call("crash"), call("pid"), reply("done")])
    async with Agent(model, tools=[faulty(tmp_path)]) as agent:
        run = await agent.run("go")
        (first, _), (crashed, sick), (second, _) = results(run)
        assert crashed == UNAVAILABLE + "it dropped the connection mid-call (Connection closed)"
        assert sick
        assert first != second
        assert not alive(int(first)) and alive(int(second))
        assert our_servers() == [int(second)]


async def test_three_crashes_open_the_breaker(tmp_path: Path) -> None:
    model = ScriptedModel([call("crash")] * 4 + [reply("done")])
    async with Agent(model, tools=[faulty(tmp_path)]) as agent:
        run = await agent.run("go")
    texts = [text for text, _ in results(run)]
    assert all(text.startswith(UNAVAILABLE) for text in texts[:3])
    assert texts[3] == "tool temporarily unavailable: circuit breaker open"


CONTEXT: ToolContext[None] = ToolContext(
    run_id="r", turn=0, call_id="c", tool_name="t", cancel=CancelToken(), session_id="s"
)  # an MCP tool never reads its context


async def test_restarts_back_off_and_a_failed_restart_is_soft(tmp_path: Path) -> None:
    now = [100.0]
    server = faulty(tmp_path, clock=lambda: now[0])
    try:
        tools = await tools_of(server)
        with pytest.raises(ToolError) as crash:
            await tools["crash"].call({}, CONTEXT)
        assert crash.value.sick
        (tmp_path / "fail-start").write_text("disk full")
        with pytest.raises(ToolError) as restart:
            await tools["echo"].call({"text": "a"}, CONTEXT)
        assert restart.value.sick
        assert restart.value.message == (
            UNAVAILABLE + "it closed the connection during start-up; "
            "its stderr ends: faulty: cannot start: disk full"
        )
        with pytest.raises(ToolError) as waiting:  # within the backoff: no new process
            await tools["echo"].call({"text": "b"}, CONTEXT)
        assert waiting.value.message.endswith("; next restart attempt in 0.5s")
        (tmp_path / "fail-start").unlink()
        now[0] += 0.5
        assert await tools["echo"].call({"text": "c"}, CONTEXT) == "c"
    finally:
        await server.aclose()
    assert our_servers() == []


def test_restart_delay_grows_to_a_cap() -> None:
    assert [restart_delay(n) for n in range(1, 5)] == [0.0, 0.5, 1.0, 2.0]
    assert restart_delay(100) == 30.0


# -- timeouts, cancellation, list changes ------------------------------------------------------


async def test_a_timeout_is_the_timeout_text_and_the_server_sees_a_cancel(tmp_path: Path) -> None:
    model = ScriptedModel([call("hang", {"tag": "t1"}), call("echo", {"text": "after"}), reply("")])
    async with Agent(model, tools=[faulty(tmp_path)], config=RunConfig(tool_timeout=1)) as agent:
        run = await agent.run("go")
        assert results(run) == [("Tool 'hang' timed out after 1s", True), ("after", False)]
        assert await eventually((tmp_path / "cancelled-t1").exists)


async def test_a_cancelled_run_cancels_the_call_and_aclose_stops_the_server(
    tmp_path: Path,
) -> None:
    token = CancelToken()
    model = ScriptedModel([call("pid"), call("hang", {"tag": "c1"}), reply("never")])
    agent = Agent(model, tools=[faulty(tmp_path)])
    task = asyncio.create_task(agent.run("go", cancel=token))
    assert await eventually((tmp_path / "hanging-c1").exists)
    token.cancel()
    with pytest.raises(Cancelled):
        await task
    assert await eventually((tmp_path / "cancelled-c1").exists)
    (pid,) = our_servers()  # the server belongs to the agent until aclose
    await agent.aclose()
    assert not alive(pid) and our_servers() == []


async def test_a_run_cancelled_while_the_server_starts_leaves_no_child(tmp_path: Path) -> None:
    token = CancelToken()
    agent = Agent(
        ScriptedModel([reply("never")]), tools=[faulty(tmp_path, env={"SLOW_START": "5"})]
    )
    task = asyncio.create_task(agent.run("go", cancel=token))
    assert await eventually(lambda: len(our_servers()) == 1)
    token.cancel()
    with pytest.raises(Cancelled):
        await task
    assert our_servers() == []
    await agent.aclose()


async def test_tools_list_changed_lists_the_tools_again(tmp_path: Path) -> None:
    model = ScriptedModel([call("grow"), call("late"), reply("done")])
    async with Agent(model, tools=[faulty(tmp_path)]) as agent:
        run = await agent.run("go")
    assert "late" not in [s.name for s in model.requests[0].tools]
    assert "late" in [s.name for s in model.requests[1].tools]
    assert results(run) == [("grown", False), ("late tool", False)]


async def test_aclose_stops_the_server_and_the_next_run_starts_it_again(tmp_path: Path) -> None:
    server = faulty(tmp_path)
    model = ScriptedModel([call("pid"), reply("one"), call("pid"), reply("two")])
    agent = Agent(model, tools=[server])
    ((first, _),) = results(await agent.run("go"))
    assert alive(int(first))
    version = server.version
    await agent.aclose()
    assert not alive(int(first)) and our_servers() == []
    assert server.version > version  # listed again when the next run starts
    ((second, _),) = results(await agent.run("again"))
    assert second != first and alive(int(second))
    await agent.aclose()
    assert our_servers() == []


# -- start-up ----------------------------------------------------------------------------------


async def test_a_server_that_fails_to_start_is_a_configuration_error_quoting_stderr(
    tmp_path: Path,
) -> None:
    (tmp_path / "fail-start").write_text("bad flag --x")  # not env: values in env are redacted
    agent = Agent(ScriptedModel([reply("never")]), tools=[faulty(tmp_path)])
    with pytest.raises(ConfigurationError) as caught:
        await agent.run("go")
    assert str(caught.value) == (
        "tool server 'faulty' could not start: it closed the connection during start-up; "
        "its stderr ends: faulty: cannot start: bad flag --x"
    )
    assert our_servers() == []


async def test_a_missing_command_is_a_configuration_error() -> None:
    server = MCPServer.stdio("agentloop-no-such-server", ["--flag"])
    with pytest.raises(
        ConfigurationError, match=r"'agentloop-no-such-server' could not start: .*No such file"
    ):
        await Agent(ScriptedModel([reply("never")]), tools=[server]).run("go")


async def test_a_slow_start_is_waited_for_and_a_hung_one_times_out(tmp_path: Path) -> None:
    slow = faulty(tmp_path, env={"SLOW_START": "1"})
    async with Agent(
        ScriptedModel([call("echo", {"text": "late"}), reply("")]), tools=[slow]
    ) as agent:
        assert results(await agent.run("go")) == [("late", False)]
    hung = faulty(tmp_path, env={"SLOW_START": "30"}, start_timeout=0.5)
    with pytest.raises(ConfigurationError, match=r"no answer to initialize within 0\.5s"):
        await Agent(ScriptedModel([reply("never")]), tools=[hung]).run("go")
    assert our_servers() == []


# -- streamable HTTP ---------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class HTTPServer:
    """Starts the faulty MCP server over HTTP (again after it dies, on the same port)."""

    url: str
    start: Callable[[], subprocess.Popen[bytes]]

    def __call__(self) -> subprocess.Popen[bytes]:
        return self.start()


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[HTTPServer]:
    port = free_port()
    started: list[subprocess.Popen[bytes]] = []

    def start() -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            [sys.executable, str(SERVER), "--http", str(port)],
            env={**os.environ, "MARKER_DIR": str(tmp_path)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        started.append(proc)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                return proc
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("the HTTP MCP server did not come up")

    yield HTTPServer(f"http://127.0.0.1:{port}/mcp", start)
    for proc in started:
        proc.kill()
        proc.wait()


async def test_streamable_http_calls_drops_and_reconnects(http_server: HTTPServer) -> None:
    first = http_server()
    server = MCPServer.http(http_server.url, headers={"X-Trace": "1"}, name="faulty")
    model = ScriptedModel(
        [
            call("echo", {"text": "over http"}),
            call("crash"),
            reply("one"),
            call("echo", {"text": "back"}),
            reply("two"),
        ]
    )
    async with Agent(model, tools=[server]) as agent:
        run = await agent.run("go")
        (echoed, _), (dropped, sick) = results(run)
        assert echoed == "over http"
        assert dropped.startswith(UNAVAILABLE + "it dropped the connection mid-call") and sick
        first.wait(timeout=5)
        http_server()  # the server comes back on the same port
        assert results(await agent.run("again")) == [("back", False)]


async def test_an_http_server_that_is_not_there_is_a_configuration_error() -> None:
    server = MCPServer.http(f"http://127.0.0.1:{free_port()}/mcp", name="nowhere")
    with pytest.raises(ConfigurationError, match="'nowhere' could not start: ConnectError"):
        await Agent(ScriptedModel([reply("never")]), tools=[server]).run("go")


# -- a killed parent ---------------------------------------------------------------------------

PARENT = """
import asyncio, sys
from pathlib import Path
from agentloop.mcp import MCPServer

async def main():
    server = MCPServer.stdio(sys.executable, [sys.argv[1]], name="faulty")
    tools = {t.name: t for t in await server.list_tools()}
    Path(sys.argv[2]).write_text(await tools["pid"].call({}, None))
    await tools["block"].call({"seconds": 60}, None)  # the server cannot read its stdin now

asyncio.run(main())
"""


async def test_a_sigkilled_parent_leaves_no_server_behind(tmp_path: Path) -> None:
    script = tmp_path / "parent.py"
    script.write_text(textwrap.dedent(PARENT))
    pid_file = tmp_path / "server.pid"
    parent = subprocess.Popen([sys.executable, str(script), str(SERVER), str(pid_file)])  # noqa: ASYNC220
    try:
        assert await eventually(lambda: pid_file.exists() and pid_file.read_text() != "", 15)
        server_pid = int(pid_file.read_text())
        await asyncio.sleep(0.3)  # the blocking call is under way
        assert alive(server_pid)
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        assert await eventually(lambda: not alive(server_pid), 3)
    finally:
        parent.kill()
        parent.wait()


# -- pure parts --------------------------------------------------------------------------------


def test_result_text_renders_every_content_kind() -> None:
    from agentloop.mcp.mapping import result_text

    result = types.CallToolResult(
        content=[
            types.TextContent(text="plain"),
            types.AudioContent(data="UklGRiQAAABXQVZFZm10IAAAAAAAAAAA", mime_type="audio/wav"),
            types.EmbeddedResource(
                resource=types.TextResourceContents(uri="file:///a.txt", text="inside")
            ),
            types.EmbeddedResource(
                resource=types.BlobResourceContents(uri="file:///b.bin", blob="AAECAw==")
            ),
            types.ResourceLink(uri="file:///c", name="c", description="a link"),
        ],
        structured_content={"ignored": "because text is present"},
    )
    assert result_text(result).splitlines() == [
        "plain",  # the audio travels as a media part (result_media), not as text
        "inside",
        "[resource file:///b.bin: binary, 4 bytes]",
        "[resource link file:///c: c (a link)]",
    ]
    from agentloop.mcp.mapping import result_media

    [audio] = result_media(result)
    assert (audio.kind, audio.media_type) == ("audio", "audio/wav")
    assert audio.data == b"RIFF\x24\x00\x00\x00WAVEfmt " + bytes(8)
    lying = types.CallToolResult(
        content=[types.ImageContent(data="JVBERi0=", mime_type="image/png")]
    )
    assert result_media(lying) == []  # a PDF that says it is a PNG stays a note
    assert result_text(lying) == "[image: image/png, 5 bytes, unreadable]"
    only_structured = types.CallToolResult(content=[], structured_content={"n": 1})
    assert result_text(only_structured) == '{"n": 1}'


def test_argument_problems_name_nested_fields_and_extras() -> None:
    import jsonschema

    from agentloop.mcp.mapping import argument_problems

    schema = {
        "type": "object",
        "properties": {
            "opts": {
                "type": "object",
                "properties": {"depth": {"type": "integer"}},
                "required": ["depth"],
                "additionalProperties": False,
            }
        },
        "required": ["opts"],
        "additionalProperties": False,
    }
    validator = jsonschema.Draft202012Validator(schema)
    assert argument_problems(validator, {"opts": {"depth": 1}}) == ""
    assert argument_problems(validator, {"opts": {"deep": 1}, "x": 2}) == (
        "opts.deep: Extra inputs are not permitted; opts.depth: Field required; "
        "x: Extra inputs are not permitted"
    )


# -- ToolError(sick=True): the mechanism the unavailable text rides on --------------------------


async def test_a_sick_tool_error_is_verbatim_and_counted_by_the_breaker() -> None:
    @tool
    def down() -> str:
        """Always sick."""
        raise ToolError("backend is down", sick=True)

    @tool
    def picky() -> str:
        """Always the model's fault."""
        raise ToolError("bad input")

    model = ScriptedModel([call("down")] * 4 + [call("picky")] * 4 + [reply("done")])
    run = await Agent(model, tools=[down, picky]).run("go")
    texts = [text for text, _ in results(run)]
    assert texts[:3] == ["backend is down"] * 3
    assert texts[3] == "tool temporarily unavailable: circuit breaker open"
    assert texts[4:] == ["bad input"] * 4  # a plain ToolError never counts


def test_a_sick_tool_error_pickles_with_its_flag() -> None:
    import pickle

    error = pickle.loads(pickle.dumps(ToolError("gone", sick=True)))
    assert error.sick and error.message == "gone"
    assert ToolError("plain").sick is False
