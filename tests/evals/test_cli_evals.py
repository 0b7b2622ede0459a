"""``agentloop eval`` (threshold, JSON, HTML, baseline, exit codes) and ``agentloop runs export
--as-test`` (a stored run becomes a pytest file that passes, and fails naming a changed call)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import agentloop as package
from agentloop import Agent, Approve
from agentloop.cli import main
from agentloop.store import SQLiteStore
from agentloop.testing import ScriptedModel, call, reply

APP = '''
from agentloop import Agent, tool
from agentloop.testing import FunctionModel, call


@tool
def lookup(city: str) -> str:
    """Look up the weather in a city."""
    return f"sunny in {city}"


@tool(requires_approval=True)
def book(city: str) -> str:
    """Book a trip."""
    return f"booked {city}"


def model(request):
    last = request.messages[-1]
    if last.role == "user":
        return call("lookup", {"city": last.text})
    return f"The weather: {last.parts[0].content}"


agent = Agent(FunctionModel(model), tools=[lookup, book])
'''

CASES = """\
name: weather
cases:
- name: paris
  inputs: Paris
  expected_output: "The weather: sunny in Paris"
- name: rome
  inputs: Rome
  expected_output: "The weather: rainy in Rome"
evaluators:
- EqualsExpected
- Trajectory: {calls: [lookup]}
"""


SRC = str(Path(package.__file__).resolve().parents[1])


def environment(cwd: Path) -> dict[str, str]:
    """This checkout's agentloop and the project's modules, no provider key."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    return {**env, "PYTHONPATH": os.pathsep.join([str(cwd), SRC])}


def project(tmp_path: Path, module: str) -> Path:
    (tmp_path / f"{module}.py").write_text(APP)
    (tmp_path / "cases.yaml").write_text(CASES)
    return tmp_path


def agentloop(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentloop", *args],
        cwd=cwd, capture_output=True, text=True, timeout=120, env=environment(cwd),
    )  # fmt: skip


def test_eval_exit_codes_and_outputs(tmp_path: Path) -> None:
    cwd = project(tmp_path, "weather_app")
    done = agentloop(cwd, "eval", "cases.yaml", "--agent", "weather_app:agent", "--json", "r.json",
                     "--html", "r.html")  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "Evaluation: weather" in done.stdout and "FAIL: pass rate 50.00%" in done.stdout
    report = json.loads((cwd / "r.json").read_text())
    assert report["pass_rate"] == 0.5 and len(report["cases"]) == 2
    assert "/runs/" in (cwd / "r.html").read_text()
    half = agentloop(cwd, "eval", "cases.yaml", "--agent", "weather_app:agent",
                     "--threshold", "0.5", "--baseline", "r.json", "--repeat", "2")  # fmt: skip
    assert half.returncode == 0, half.stderr
    assert "against r.json: 0 regressions, 0 fixes" in half.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["missing.yaml", "--agent", "weather_app2:agent"], "cannot read missing.yaml"),
        (["cases.yaml", "--agent", "weather_app2:nobody"], "--agent weather_app2:nobody"),
        (["cases.yaml", "--agent", "weather_app2:model"], "not an Agent"),
        (["cases.yaml", "--agent", "weather_app2:agent", "--threshold", "2"], "--threshold"),
        (["cases.yaml", "--agent", "weather_app2:agent", "--repeat", "0"], "repeat must be"),
    ],
)
def test_eval_bad_file_agent_or_flag_is_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    args: list[str], message: str,
) -> None:  # fmt: skip
    monkeypatch.chdir(project(tmp_path, "weather_app2"))
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["eval", *args]) == 2
    assert message in capsys.readouterr().err


def test_eval_of_a_malformed_dataset_is_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(project(tmp_path, "weather_app3"))
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "bad.yaml").write_text("cases:\n- name: a\n")
    assert main(["eval", "bad.yaml", "--agent", "weather_app3:agent"]) == 2
    assert "DatasetError: bad.yaml: case a: missing 'inputs'" in capsys.readouterr().err


def stored_run(tmp_path: Path) -> str:
    sys.path.insert(0, str(tmp_path))
    try:
        import export_app  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(tmp_path))
    store = SQLiteStore(tmp_path / "runs.db")
    model = ScriptedModel([
        call("lookup", {"city": "Paris"}), call("book", {"city": "Paris"}),
        reply("Booked. Sunny in Paris. key sk-proj-abcdefghijklmnop0123456789"),
    ])  # fmt: skip
    agent = Agent(model, tools=[export_app.lookup, export_app.book], store=store, session_id="s")
    run = agent.run_sync("Plan a trip to Paris")
    done = agent.continue_run_sync(decisions={run.pending[0].call.id: Approve()})
    agent.close()
    store.close()
    return done.id


def pytest_file(cwd: Path, name: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", name],
        cwd=cwd, capture_output=True, text=True, timeout=120, env=environment(cwd),
    )  # fmt: skip


@pytest.mark.parametrize("with_agent", [False, True])
def test_a_stored_run_becomes_a_test_that_passes_then_names_a_change(
    tmp_path: Path, with_agent: bool
) -> None:
    (tmp_path / "export_app.py").write_text(APP)
    run_id = stored_run(tmp_path)
    extra = ["--agent", "export_app:agent"] if with_agent else []
    done = agentloop(tmp_path, "runs", "export", run_id[:10], "--as-test", "test_trip.py",
                     "--store", "runs.db", *extra)  # fmt: skip
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "test_trip.py").read_text()
    assert "sk-proj-abcdefghijklmnop" not in text and str(tmp_path) not in text
    assert "agentloop._" not in text and "runs.db" not in text
    passed = pytest_file(tmp_path, "test_trip.py")
    assert passed.returncode == 0, passed.stdout + passed.stderr
    if with_agent:  # the real tool changes: the test names the call
        (tmp_path / "export_app.py").write_text(APP.replace('f"sunny in {city}"', '"rain"'))
        failed = pytest_file(tmp_path, "test_trip.py")
        assert failed.returncode == 1
        assert "lookup (call_1): recorded ('sunny in Paris', False), got ('rain', False)" in (
            failed.stdout
        )


def test_export_of_an_unknown_run_is_exit_2(tmp_path: Path) -> None:
    (tmp_path / "export_app.py").write_text(APP)
    stored_run(tmp_path)
    done = agentloop(tmp_path, "runs", "export", "nope", "--as-test", "t.py", "--store", "runs.db")
    assert done.returncode == 2 and "no stored run with an id starting 'nope'" in done.stderr
    assert not (tmp_path / "t.py").exists()


TYPED_APP = '''
from pydantic import BaseModel

from agentloop import Agent, tool
from agentloop.testing import ScriptedModel


class Forecast(BaseModel):
    city: str
    sky: str


@tool
def lookup(city: str) -> str:
    """Look up the weather in a city."""
    return f"sunny in {city}"


agent = Agent(ScriptedModel([]), tools=[lookup], output_type=Forecast)
'''


@pytest.mark.parametrize("with_agent", [False, True])
def test_a_typed_run_exports_with_and_without_its_agent(tmp_path: Path, with_agent: bool) -> None:
    (tmp_path / "typed_app.py").write_text(TYPED_APP)
    sys.path.insert(0, str(tmp_path))
    try:
        import typed_app  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(tmp_path))
    store = SQLiteStore(tmp_path / "runs.db")
    model = ScriptedModel(
        [call("lookup", {"city": "Oslo"}), call("final_result", {"city": "Oslo", "sky": "sunny"})]
    )
    agent = Agent(model, tools=[typed_app.lookup], output_type=typed_app.Forecast, store=store)
    run = agent.run_sync("Oslo?")
    agent.close()
    store.close()
    extra = ["--agent", "typed_app:agent"] if with_agent else []
    done = agentloop(tmp_path, "runs", "export", run.id, "--as-test", "test_typed.py",
                     "--store", "runs.db", *extra)  # fmt: skip
    assert done.returncode == 0, done.stderr
    passed = pytest_file(tmp_path, "test_typed.py")
    assert passed.returncode == 0, passed.stdout + passed.stderr


def test_a_run_with_provider_tool_parts_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from agentloop.provider_tools import WebSearch
    from agentloop.providers.anthropic import AnthropicClient
    from agentloop.testing import FakeReply

    from .conftest import serving

    store = SQLiteStore(tmp_path / "runs.db")
    with serving([FakeReply("It loops.", web_search=("agent loops",))]) as server:
        client = AnthropicClient("claude-sonnet-4-5", api_key="sk-ant-x", base_url=server.root_url)
        agent = Agent(client, provider_tools=[WebSearch()], store=store)
        run = agent.run_sync("does it loop?")
        agent.close()
    store.close()
    assert run.output == "It loops." and run.usage.provider_tool_calls == {"web_search": 1}
    test_file = tmp_path / "test_search.py"
    code = main(["runs", "export", run.id, "--as-test", str(test_file),
                 "--store", str(tmp_path / "runs.db")])  # fmt: skip
    assert code == 2 and not test_file.exists()
    assert f"run {run.id} has a ProviderToolCallPart part" in capsys.readouterr().err
