"""``agentloop eval --cassette``: the CI command replays a dataset offline, with its exit codes.

Found by building an ops service from the docs alone: evals.md says CI replays the dataset from
a cassette with no provider and no key, and that CI runs ``agentloop eval --threshold``, but the
command had no way to use a cassette: CI either needed the provider (or a stand-in) up, or gave
up the command's threshold, baseline and exit codes for a Python script. ``--cassette PATH``
replays (``--cassette-mode once`` records a missing file first); a changed request is the case's
``CassetteMismatch`` and exit 1; a cassette that does not exist is exit 2 naming the fix.

Real parts: the CLI as a subprocess, the fake provider over HTTP on 127.0.0.1 while recording,
the real OpenAI adapter, and nothing listening while replaying.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

from agentloop.testing import FakeProviderServer, FakeReply, FakeToolCall

APP = '''
import os

from agentloop import Agent, tool
from agentloop.providers.openai import OpenAIClient


@tool
def service_status(service: str) -> str:
    """A service's health."""
    return f"{service}: healthy"


client = OpenAIClient("gpt-4o-mini", api_key="sk-offline-0000", base_url=os.environ["OPS_URL"])
agent = Agent(client, tools=[service_status])
'''

CASES = """\
name: ops
cases:
- name: api
  inputs: api
  expected_output: "api: healthy"
evaluators:
- EqualsExpected
- Trajectory: {calls: [service_status], mode: exact}
"""


def _answer(body: object) -> FakeReply:
    assert isinstance(body, dict)
    last = body["messages"][-1]
    if last["role"] == "user":
        return FakeReply(tool_calls=[FakeToolCall("service_status", {"service": last["content"]})])
    return FakeReply(str(last["content"]))


def _eval(tmp_path: Path, url: str, *flags: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OPS_URL": url, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    command = [sys.executable, "-m", "agentloop", "eval", "cases.yaml", "--agent", "opsapp:agent"]
    return subprocess.run(
        [*command, *flags], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )


async def test_eval_records_once_then_replays_offline_with_its_exit_codes(tmp_path: Path) -> None:
    (tmp_path / "opsapp.py").write_text(APP)
    (tmp_path / "cases.yaml").write_text(CASES)
    missing = _eval(tmp_path, "http://127.0.0.1:9/v1", "--cassette", "ops.yaml")
    assert missing.returncode == 2, missing.stderr
    assert "--cassette ops.yaml: no such file" in missing.stderr
    assert "--cassette-mode once" in missing.stderr

    async with FakeProviderServer(default=_answer) as server:
        flags = ("--cassette", "ops.yaml", "--cassette-mode", "once")
        recorded = await asyncio.to_thread(_eval, tmp_path, server.base_url, *flags)
        assert recorded.returncode == 0, recorded.stdout + recorded.stderr
        assert len(server.requests) == 2
    assert (tmp_path / "ops.yaml").is_file()

    offline = "http://127.0.0.1:9/v1"  # nothing listens: every answer comes from the cassette
    replayed = _eval(tmp_path, offline, "--cassette", "ops.yaml", "--json", "report.json")
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert "pass rate 100.00%" in replayed.stdout

    (tmp_path / "cases.yaml").write_text(CASES.replace("inputs: api", "inputs: db"))
    changed = _eval(tmp_path, offline, "--cassette", "ops.yaml")
    assert changed.returncode == 1, changed.stdout + changed.stderr
    assert "CassetteMismatch" in changed.stdout
