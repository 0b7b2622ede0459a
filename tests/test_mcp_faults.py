"""The MCP fault matrix of issue 10, one row per fault, over a real server in a subprocess.

Each row runs one agent over ``tests/mcp_servers/faulty.py``: the faulty call, then an ordinary
call, then a reply. It checks the exact soft text (or the ``ConfigurationError``), that the run
went on where SPEC 13 says it does, and, after ``aclose``, that ``/proc`` lists no child of
this test process at all (zombies included: every child was reaped too).
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from agentloop import Agent, RunConfig
from agentloop.errors import ConfigurationError
from agentloop.mcp import MCPServer
from agentloop.testing import ScriptedCall, ScriptedModel, call, reply

SERVER = Path(__file__).parent / "mcp_servers" / "faulty.py"
UNAVAILABLE = "tool server 'faulty' is unavailable: "


def _all_children() -> list[int]:
    """Every child process of this test process (any thread's), live or not yet reaped."""
    found: list[int] = []
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        try:
            found += [int(pid) for pid in (task / "children").read_text().split()]
        except OSError:  # a thread that ended while we looked
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


@dataclass(frozen=True)
class Fault:
    """One row: the faulty call, the text it must produce, and how the server starts."""

    calls: list[ScriptedCall]
    expected: list[str]
    env: dict[str, str] = field(default_factory=dict)
    config: RunConfig = field(default_factory=RunConfig)


ROWS = {
    "crash mid-call (os._exit)": Fault(
        [call("crash")], [UNAVAILABLE + "it dropped the connection mid-call (Connection closed)"]
    ),
    "hang past the timeout": Fault(
        [call("hang", {"tag": "t"})],
        ["Tool 'hang' timed out after 1s"],
        config=RunConfig(tool_timeout=1),
    ),
    "isError": Fault([call("refuse", {"why": "no"})], ["Error executing tool refuse: refused: no"]),
    "JSON-RPC error": Fault([call("protocol_error")], ["backend quota exceeded"]),
    "tool list changes": Fault([call("grow"), call("late")], ["grown", "late tool"]),
    "starts slowly": Fault([call("echo", {"text": "late"})], ["late"], env={"SLOW_START": "1"}),
}


@pytest.mark.parametrize("name", ROWS)
async def test_a_fault_is_soft_and_the_run_goes_on(name: str, tmp_path: Path) -> None:
    row = ROWS[name]
    model = ScriptedModel([*row.calls, call("echo", {"text": "after"}), reply("done")])
    server = MCPServer.stdio(
        sys.executable, [str(SERVER)], env={"MARKER_DIR": str(tmp_path), **row.env}, name="faulty"
    )
    async with Agent(model, tools=[server], config=row.config) as agent:
        run = await agent.run("go")
    texts = [p.content for m in run.messages for p in m.tool_results_parts]
    assert texts == [*row.expected, "after"]
    assert run.output == "done" and run.stop_reason is None
    assert children() == []


async def test_a_huge_result_is_cut_by_the_engine_and_the_run_goes_on(tmp_path: Path) -> None:
    model = ScriptedModel(
        [call("big", {"size": 1_000_000}), call("echo", {"text": "after"}), reply("done")]
    )
    server = MCPServer.stdio(
        sys.executable, [str(SERVER)], env={"MARKER_DIR": str(tmp_path)}, name="faulty"
    )
    config = RunConfig(context_window=100_000)
    async with Agent(model, tools=[server], config=config) as agent:
        run = await agent.run("go")
    (big, big_error), (after, _) = [
        (p.content, p.is_error) for m in run.messages for p in m.tool_results_parts
    ]
    assert len(big) == 100_000 and big.startswith("xxx") and not big_error
    assert big.endswith(
        "[cut: 900,000 of 1,000,000 characters not shown; "
        "the result is larger than the context window allows]"
    )
    assert after == "after" and run.output == "done"
    assert children() == []


@pytest.mark.parametrize(
    ("env", "why"),
    [
        ({"FAIL_START": "bad flag"}, "its stderr ends: faulty: cannot start: bad flag"),
        ({"SLOW_START": "30"}, r"no answer to initialize within 0\.5s"),
    ],
    ids=["fails to start", "hangs at start"],
)
async def test_a_server_that_does_not_start_is_a_configuration_error(
    env: dict[str, str], why: str, tmp_path: Path
) -> None:
    env = dict(env)
    if "FAIL_START" in env:  # as a file: a value given in env is never quoted from stderr
        (tmp_path / "fail-start").write_text(env.pop("FAIL_START"))
    server = MCPServer.stdio(
        sys.executable,
        [str(SERVER)],
        env={"MARKER_DIR": str(tmp_path), **env},
        name="faulty",
        start_timeout=0.5,
    )
    agent = Agent(ScriptedModel([reply("never")]), tools=[server])
    with pytest.raises(ConfigurationError, match=f"'faulty' could not start: .*{why}"):
        await agent.run("go")
    await agent.aclose()
    assert children() == []


def test_children_sees_a_child() -> None:
    """The /proc check is not vacuous: it lists a child until it is reaped."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert proc.pid in children()
    finally:
        proc.kill()
        proc.wait()
    assert proc.pid not in children()
