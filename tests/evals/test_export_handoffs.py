"""``agentloop runs export --as-test --agent`` of a run that handed off (SPEC 23 x 26).

The exported test scripts every agent the run reached with one ``ScriptedModel`` (the replies in
the order they came): the receiver, found by name in the agent's module, is overridden too, so
its real model never answers the replay. A receiver that is not a name of that module is exit 2
naming the fix. The test file runs in a real pytest subprocess.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from agentloop import Agent
from agentloop.cli import main
from agentloop.store import SQLiteStore
from agentloop.testing import ScriptedModel, call, reply

from .test_cli_evals import agentloop, pytest_file

APP = '''
from agentloop import Agent, handoff, tool
from agentloop.testing import ScriptedModel


@tool
def refund(order: str) -> str:
    """Refund an order."""
    return f"refunded {order}"


REAL = ScriptedModel([])  # stands for a real provider: a request to it fails the test
billing = Agent(REAL, name="billing", tools=[refund])
agent = Agent(ScriptedModel([]), handoffs=[handoff(billing, name="refunds")])
'''


def stored_run(tmp_path: Path, app: str) -> str:
    (tmp_path / "shop_app.py").write_text(app)
    sys.path.insert(0, str(tmp_path))
    try:
        sys.modules.pop("shop_app", None)
        import shop_app  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(tmp_path))
    billing = Agent(
        ScriptedModel([call("refund", {"order": "A1"}), reply("Refunded A1.")]),
        name="billing",
        tools=[shop_app.refund],
    )
    from agentloop import handoff

    front = Agent(
        ScriptedModel([call("transfer_to_refunds", {})]),
        handoffs=[handoff(billing, name="refunds")],
        store=SQLiteStore(tmp_path / "runs.db"),
    )
    run = front.run_sync("refund A1")
    front.close()
    sys.modules.pop("shop_app", None)
    assert run.output == "Refunded A1." and run.last_agent == "refunds"
    return run.id


def test_a_handed_off_run_scripts_its_receiver_too(tmp_path: Path) -> None:
    run_id = stored_run(tmp_path, APP)
    done = agentloop(tmp_path, "runs", "export", run_id, "--as-test", "test_refund.py",
                     "--store", "runs.db", "--agent", "shop_app:agent")  # fmt: skip
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "test_refund.py").read_text()
    assert "from shop_app import billing as receiver_1" in text
    passed = pytest_file(tmp_path, "test_refund.py")
    assert passed.returncode == 0, passed.stdout + passed.stderr


def test_a_receiver_the_module_does_not_name_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    hidden = APP.replace("billing = Agent(", "_made = [Agent(").replace(
        "tools=[refund])\nagent = Agent(ScriptedModel([]), handoffs=[handoff(billing,",
        "tools=[refund])]\nagent = Agent(ScriptedModel([]), handoffs=[handoff(_made[0],",
    )
    run_id = stored_run(tmp_path, hidden)
    monkeypatch.chdir(tmp_path)
    code = main(["runs", "export", run_id, "--as-test", "t.py", "--store", "runs.db",
                 "--agent", "shop_app:agent"])  # fmt: skip
    sys.modules.pop("shop_app", None)
    assert code == 2 and not (tmp_path / "t.py").exists()
    err = capsys.readouterr().err
    assert "handed off to 'refunds'" in err and "export without --agent" in err
