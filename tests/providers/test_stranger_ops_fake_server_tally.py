"""``agentloop fake-server`` says, when it stops, how many requests it got and refused with 429.

Found by building an ops service from the docs alone: two fleet workers shared one governor
against ``agentloop fake-server --script`` with ``rate_limit`` (fake-server.md's own way to run
a provider with a limit), and the proof that the governor kept them under it, "0 refused with a
429", was only reachable from Python (``FakeProviderServer.rate_limited``). At Ctrl-C the command
now prints ``received N requests; answered M with a 429 (rate limit R per W s)``.

Real parts: the command as a subprocess, httpx over 127.0.0.1, SIGINT.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import httpx


def test_ctrl_c_prints_what_the_limit_refused(tmp_path: Path) -> None:
    script = tmp_path / "fleet.toml"
    script.write_text('rate_limit = { rpm = 2, window = 60 }\n[default]\ntext = "ok"\n')
    command = [sys.executable, "-m", "agentloop", "fake-server", "--script", str(script)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        url = process.stdout.readline().split(" on ", 1)[1].split()[0]
        body = {"model": "fake-model", "messages": [{"role": "user", "content": "hi"}]}
        statuses = [
            httpx.post(f"{url}/chat/completions", json=body, timeout=10).status_code
            for _ in range(3)
        ]
    finally:
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=10)
    assert statuses == [200, 200, 429]
    assert out.splitlines()[-1] == (
        "received 3 requests; answered 1 with a 429 (rate limit 2 per 60 s)"
    ), out + err
    assert process.returncode == 130
