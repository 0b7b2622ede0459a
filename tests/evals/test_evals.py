"""Evals (SPEC 23): datasets in pydantic-evals' format, every evaluator, evaluate() and its
failures, the report (JSON, diff, table, HTML) and the pytest integration."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from agentloop import Agent, tool
from agentloop.errors import ConfigurationError, DatasetError, InvalidInput
from agentloop.evals import (
    Case,
    Contains,
    Dataset,
    Equals,
    EqualsExpected,
    EvaluationReason,
    EvaluationReport,
    Evaluator,
    EvaluatorContext,
    IsInstance,
    MaxCost,
    MaxDuration,
    MaxTurns,
    ToolCalled,
    Trajectory,
)
from agentloop.messages import ToolResultPart, Usage
from agentloop.model import ModelRequest
from agentloop.testing import FunctionModel, call, reply

# The file pydantic-evals' "Dataset Serialization" page shows `to_file` writing, as written.
PYDANTIC_EVALS_YAML = """\
# yaml-language-server: $schema=my_tests_schema.json
name: my_tests
cases:
- name: test_1
  inputs: hello
  expected_output: HELLO
evaluators:
- IsInstance: str
- EqualsExpected
"""

PYDANTIC_EVALS_JSON = {
    "$schema": "my_tests_schema.json",
    "name": "my_tests",
    "cases": [
        {"name": "uppercase_basic", "inputs": "hello world", "expected_output": "HELLO WORLD",
         "metadata": {"difficulty": "easy"}, "evaluators": [{"Contains": {"value": "WORLD"}}]},
        {"name": "uppercase_with_numbers", "inputs": "hello 123", "expected_output": "HELLO 123"},
    ],
    "evaluators": ["EqualsExpected", {"Contains": {"value": "hello", "case_sensitive": False}}],
}  # fmt: skip


async def upper(text: str) -> str:
    return text.upper()


@tool
def lookup(city: str) -> str:
    """Look up the weather in a city."""
    return f"sunny in {city}"


@tool
def convert(celsius: int) -> str:
    """Convert to Fahrenheit."""
    return str(celsius * 9 // 5 + 32)


def weather_model(request: ModelRequest) -> Any:
    last = request.messages[-1]
    if last.role == "user":
        return [call("lookup", {"city": last.text}), call("convert", {"celsius": 20})]
    result = last.parts[0]
    assert isinstance(result, ToolResultPart)
    return reply(f"{result.content}, 68F", usage=Usage(100, 20))


def weather_agent(model: str = "function") -> Agent[Any]:
    return Agent(FunctionModel(weather_model, model=model), tools=[lookup, convert])


# -- datasets and files --------------------------------------------------------------------


def test_pydantic_evals_yaml_from_its_docs_loads_and_runs() -> None:
    dataset = Dataset.from_text(PYDANTIC_EVALS_YAML)
    assert dataset.name == "my_tests" and [c.name for c in dataset.cases] == ["test_1"]
    assert dataset.evaluators == (IsInstance("str"), EqualsExpected())
    report = dataset.evaluate_sync(upper)
    assert report.pass_rate == 1.0
    assert set(report.cases[0].assertions) == {"IsInstance", "EqualsExpected"}


def test_pydantic_evals_json_loads_and_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "cases.json"
    path.write_text(json.dumps(PYDANTIC_EVALS_JSON))
    dataset = Dataset.from_file(path)
    assert dataset.cases[0].metadata == {"difficulty": "easy"}
    assert dataset.cases[0].evaluators == (Contains("WORLD"),)
    report = dataset.evaluate_sync(upper)
    assert report.pass_rate == 1.0  # "hello" case-insensitively, and the expected outputs
    assert report.cases[0].assertions["Contains"].value is True
    again = tmp_path / "again.yaml"
    dataset.to_file(again)
    reloaded = Dataset.from_file(again)
    assert [c.name for c in reloaded.cases] == [c.name for c in dataset.cases]
    assert reloaded.evaluators == dataset.evaluators
    assert reloaded.cases[0].evaluators == dataset.cases[0].evaluators


def test_unnamed_cases_are_numbered_and_duplicates_refused() -> None:
    dataset = Dataset(cases=[Case(inputs=1), Case(inputs=2, name="two"), Case(inputs=3)])
    assert [c.name for c in dataset.cases] == ["case_1", "two", "case_3"]
    with pytest.raises(DatasetError, match="duplicate case name 'x'") as caught:
        Dataset(cases=[Case(inputs=1, name="x"), Case(inputs=2, name="x")])
    assert caught.value.case == "x"


@pytest.mark.parametrize(
    ("text", "message", "case"),
    [
        ("cases: [", "not valid YAML", None),
        ("name: x", "a dataset needs a 'cases' list", None),
        ("cases:\n- name: a\n  expected_output: 1", "case a: missing 'inputs'", "a"),
        (
            "cases:\n- inputs: 1\n  evaluators: [Nope]",
            "case case_1: unknown evaluator 'Nope'",
            "case_1",
        ),
        ("cases:\n- {name: a, inputs: 1}\n- {name: a, inputs: 2}", "duplicate case name 'a'", "a"),
        (
            "cases:\n- {name: a, inputs: 1, evaluators: [{Equals: {nope: 1}}]}",
            "case a: Equals:",
            "a",
        ),
        ("cases:\n- {name: a, inputs: 1, extra: 2}", "case a: unknown field(s) extra", "a"),
    ],
)
def test_a_bad_file_is_a_dataset_error_before_any_task(
    text: str, message: str, case: str | None
) -> None:
    with pytest.raises(DatasetError) as caught:
        Dataset.from_text(text, path="cases.yaml")
    error = caught.value
    assert message in str(error) and error.case == case and error.path == "cases.yaml"
    assert isinstance(error, InvalidInput) and isinstance(error, ValueError)


def test_an_unknown_evaluator_lists_the_known_ones() -> None:
    with pytest.raises(DatasetError) as caught:
        Dataset.from_text("cases: [{inputs: 1}]\nevaluators: [Bogus]")
    for name in ("Contains", "LLMJudge", "Trajectory", "ToolCalled", "MaxCost"):
        assert name in str(caught.value)


@dataclass(frozen=True)
class Shorter(Evaluator):
    limit: int

    def evaluate(self, ctx: EvaluatorContext) -> bool:
        return len(ctx.output) < self.limit


def test_custom_evaluator_types_load_from_a_file() -> None:
    dataset = Dataset.from_text(
        "cases: [{inputs: ab}]\nevaluators: [{Shorter: 3}]", custom_evaluator_types=[Shorter]
    )
    assert dataset.evaluators == (Shorter(3),)
    assert dataset.evaluate_sync(upper).pass_rate == 1.0


# -- evaluators ----------------------------------------------------------------------------


def ctx(output: Any, **fields: Any) -> EvaluatorContext:
    base: dict[str, Any] = {"name": "c", "inputs": None, "metadata": None,
                            "expected_output": None, "duration": 0.5, "runs": ()}  # fmt: skip
    return EvaluatorContext(output=output, **{**base, **fields})


def test_pydantic_evals_evaluators() -> None:
    assert Equals(3).evaluate(ctx(3)) is True and Equals(3).evaluate(ctx(4)) is False
    assert EqualsExpected().evaluate(ctx("a", expected_output="a")) is True
    assert EqualsExpected().evaluate(ctx("a")) == {}  # no expectation: no verdict
    assert Contains("ell").evaluate(ctx("hello")).value is True
    assert Contains("ELL").evaluate(ctx("hello")).value is False
    assert Contains("ELL", case_sensitive=False).evaluate(ctx("hello")).value is True
    assert Contains(2).evaluate(ctx([1, 2])).value is True
    assert Contains({"a": 1}).evaluate(ctx({"a": 1, "b": 2})).value is True
    assert IsInstance("str").evaluate(ctx("x")).value is True
    assert IsInstance("int").evaluate(ctx(True)).value is True  # bool is an int (its MRO)
    assert IsInstance("str").evaluate(ctx(1)).reason == "output is a int, not str"
    assert MaxDuration(1).evaluate(ctx("x")).value is True
    assert MaxDuration(0.1).evaluate(ctx("x")).value is False


async def weather_runs(prompt: str = "Paris") -> list[Any]:
    agent = weather_agent()
    return [await agent.run(prompt)]


async def test_tool_called_and_max_turns() -> None:
    runs = await weather_runs()
    seen = ctx("x", runs=runs)
    assert ToolCalled("lookup").evaluate(seen).value is True
    assert ToolCalled("lookup", arguments={"city": "Paris"}).evaluate(seen).value is True
    assert ToolCalled("lookup", arguments={"city": "Rome"}).evaluate(seen).value is False
    assert ToolCalled("lookup", times=1).evaluate(seen).value is True
    assert ToolCalled("lookup", times=2).evaluate(seen).value is False
    assert ToolCalled("delete").evaluate(seen).value is False
    assert MaxTurns(2).evaluate(seen).value is True
    assert MaxTurns(1).evaluate(seen).value is False


@pytest.mark.parametrize(
    ("calls", "mode", "expected"),
    [
        (["lookup", "convert"], "exact", True),
        (["convert", "lookup"], "exact", False),
        (["lookup"], "exact", False),
        (["lookup"], "in_order", True),
        (["lookup", "convert"], "in_order", True),
        (["convert", "lookup"], "in_order", False),
        (["convert", "lookup"], "any_order", True),
        (["convert", "convert"], "any_order", False),
        ([{"name": "lookup", "arguments": {"city": "Paris"}}, "convert"], "exact", True),
        ([{"name": "lookup", "arguments": {"city": "Rome"}}, "convert"], "exact", False),
    ],
)
async def test_trajectory_modes(calls: list[Any], mode: Any, expected: bool) -> None:
    seen = ctx("x", runs=await weather_runs())
    assert Trajectory(calls, mode=mode).evaluate(seen).value is expected


async def test_trajectory_arguments_exact_and_bad_steps() -> None:
    seen = ctx("x", runs=await weather_runs())
    partial = [{"name": "lookup", "arguments": {}}, {"name": "convert", "arguments": {}}]
    assert Trajectory(partial).evaluate(seen).value is True
    assert Trajectory(partial, arguments="exact").evaluate(seen).value is False
    with pytest.raises(ValueError, match="mode must be"):
        Trajectory(["a"], mode="sometimes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="a trajectory step"):
        Trajectory([42])


async def test_max_cost_fails_when_the_cost_is_unknown() -> None:
    unpriced = ctx("x", runs=await weather_runs())
    assert unpriced.runs[0].cost is None
    result = MaxCost(10.0).evaluate(unpriced)
    assert result.value is False and "unknown" in (result.reason or "")
    priced_agent = weather_agent("gpt-4o-mini")
    priced = ctx("x", runs=[await priced_agent.run("Paris")])
    if priced.runs[0].cost is None:
        pytest.skip("genai-prices is not installed: no model has a price")
    assert MaxCost(10.0).evaluate(priced).value is True
    assert MaxCost(0.0).evaluate(priced).value is False


# -- evaluate() ----------------------------------------------------------------------------


async def test_an_agent_task_gives_output_runs_usage_and_trajectory() -> None:
    dataset = Dataset(
        cases=[Case(name="paris", inputs="Paris", expected_output="sunny in Paris, 68F")],
        evaluators=[EqualsExpected(), Trajectory(["lookup", "convert"]), MaxTurns(2)],
    )
    report = await dataset.evaluate(weather_agent())
    case = report.cases[0]
    assert case.passed and case.output == "sunny in Paris, 68F"
    assert len(case.run_ids) == 1 and case.usage == Usage(100, 20)
    assert case.cost is None and report.totals.cost is None  # FunctionModel has no price
    assert report.name == "evaluation" or report.name


class Counting:
    def __init__(self) -> None:
        self.now = self.peak = 0

    async def __call__(self, inputs: int) -> int:
        self.now += 1
        self.peak = max(self.peak, self.now)
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        self.now -= 1
        return inputs


async def test_concurrency_is_bounded_and_repeats_are_adjacent() -> None:
    task = Counting()
    dataset = Dataset(cases=[Case(inputs=i) for i in range(20)], evaluators=[Equals(3)])
    report = await dataset.evaluate(task, max_concurrency=3, repeat=2)
    assert task.peak == 3
    assert [(c.name, c.repeat) for c in report.cases[:4]] == [
        ("case_1", 1), ("case_1", 2), ("case_2", 1), ("case_2", 2)
    ]  # fmt: skip
    assert report.totals.cases == 40 and report.totals.passed == 2


@pytest.mark.parametrize(
    ("options", "field"),
    [({"max_concurrency": 0}, "max_concurrency"), ({"repeat": 0}, "repeat"),
     ({"repeat": 1.5}, "repeat")],
)  # fmt: skip
async def test_bad_options_before_any_case_runs(options: dict[str, Any], field: str) -> None:
    ran: list[Any] = []
    dataset = Dataset(cases=[Case(inputs=1)])
    with pytest.raises(ConfigurationError) as caught:
        await dataset.evaluate(ran.append, **options)
    assert caught.value.field == field and ran == []
    with pytest.raises(ConfigurationError, match="task must be an Agent or a callable"):
        await dataset.evaluate(42)  # type: ignore[arg-type]


class Raises(Evaluator):
    def evaluate(self, ctx: EvaluatorContext) -> bool:
        raise KeyError("missing")


class Slow(Evaluator):
    async def evaluate(self, ctx: EvaluatorContext) -> bool:
        await asyncio.sleep(10)
        return True


class Weird(Evaluator):
    def evaluate(self, ctx: EvaluatorContext) -> Any:
        return [1]


async def test_failures_are_never_a_pass_and_never_stop_other_cases() -> None:
    async def task(inputs: str) -> str:
        if inputs == "boom":
            raise RuntimeError("the task broke")
        if inputs == "slow":
            await asyncio.sleep(10)
        return inputs

    dataset = Dataset(
        cases=[Case(name=n, inputs=n) for n in ("ok", "boom", "slow")],
        evaluators=[Raises(), Slow(), Weird(), Equals("ok")],
    )
    report = await dataset.evaluate(task, task_timeout=0.2, evaluator_timeout=0.05)
    ok, boom, slow = report.cases
    assert ok.evaluator_failures == {
        "Raises": "KeyError: 'missing'",
        "Slow": "timed out after 0.05s",
        "Weird": "TypeError: an evaluator returns bool, a number, str or EvaluationReason, "
        "not list",
    }
    assert ok.assertions["Equals"].value is True and not ok.passed
    assert (boom.error, boom.error_message, boom.passed) == (
        "RuntimeError",
        "the task broke",
        False,
    )
    assert (slow.error, slow.error_message) == ("TimeoutError", "task timed out after 0.2s")
    assert report.totals.errors == 2 and report.pass_rate == 0.0


async def test_a_hard_error_keeps_its_run_ids_and_a_pause_fails_its_case() -> None:
    @tool(requires_approval=True)
    def wipe() -> str:
        """Wipe."""
        return "wiped"

    def model(request: ModelRequest) -> Any:
        text = request.messages[0].text
        if text == "fail":
            raise ConfigurationError("the model is misconfigured")
        return call("wipe") if request.messages[-1].role == "user" else "done"

    agent = Agent(FunctionModel(model), tools=[wipe])
    report = await Dataset(cases=[Case(name=n, inputs=n) for n in ("fail", "pause")]).evaluate(
        agent
    )
    fail, pause = report.cases
    assert fail.error == "ConfigurationError" and len(fail.run_ids) == 1
    assert pause.error == "RunPaused" and len(pause.run_ids) == 1


async def test_custom_evaluators_return_every_kind() -> None:
    class Everything(Evaluator):
        async def evaluate(self, ctx: EvaluatorContext) -> dict[str, Any]:
            assert (ctx.name, ctx.inputs, ctx.metadata) == ("c", "x", {"m": 1})
            assert ctx.expected_output == "X" and ctx.output == "X" and ctx.duration >= 0
            return {"ok": True, "score": 0.5, "label": "good",
                    "why": EvaluationReason(False, "because")}  # fmt: skip

    dataset = Dataset(
        cases=[Case(name="c", inputs="x", expected_output="X", metadata={"m": 1})],
        evaluators=[Everything()],
    )
    case = (await dataset.evaluate(upper)).cases[0]
    assert case.scores["score"].value == 0.5 and case.labels["label"].value == "good"
    assert case.assertions["ok"].value is True
    assert case.assertions["why"].reason == "because" and not case.passed


def test_a_sync_task_may_call_run_sync() -> None:
    agent = weather_agent()
    dataset = Dataset(cases=[Case(inputs="Rome")], evaluators=[ToolCalled("lookup")])
    report = dataset.evaluate_sync(lambda city: agent.run_sync(city).output)
    assert report.cases[0].passed and len(report.cases[0].run_ids) == 1


# -- the report ----------------------------------------------------------------------------


async def two_reports() -> tuple[EvaluationReport, EvaluationReport]:
    cases = [Case(name=n, inputs=n) for n in ("a", "b", "c")]

    class Score(Evaluator):
        def evaluate(self, ctx: EvaluatorContext) -> float:
            return 1.0 if ctx.output == "A" else 0.25

    dataset = Dataset(cases=cases, evaluators=[Contains("A"), Score()])
    before = await dataset.evaluate(upper, name="before")

    async def worse(text: str) -> str:
        return {"a": "x", "b": "A", "c": "C"}[text]

    return before, await dataset.evaluate(worse, name="after")


async def test_json_round_trip_and_diff() -> None:
    before, after = await two_reports()
    again = EvaluationReport.from_json(after.to_json())
    assert again.to_json() == after.to_json()
    assert again.pass_rate == after.pass_rate and again.cases[0].passed == after.cases[0].passed
    diff = after.diff(before)
    assert diff.regressions == ["a"] and diff.fixes == ["b"]
    assert diff.pass_rate_delta == 0.0
    assert diff.score_deltas == {"Score": pytest.approx(0.0)}
    worse = await Dataset(cases=[Case(name="a", inputs="a")], evaluators=[Contains("A")]).evaluate(
        upper
    )
    assert before.diff(worse).pass_rate_delta == pytest.approx(1 / 3 - 1)
    with pytest.raises(ValueError, match="not an agentloop eval report"):
        EvaluationReport.from_json("{}")


async def test_the_table_and_the_page() -> None:
    before, after = await two_reports()
    console = Console(record=True, width=140)
    console.print(after.render(baseline=before))
    text = console.export_text()
    assert "Evaluation: after" in text and "regression" in text and "FAIL" in text
    assert "1/3 passed" in text
    report = await Dataset(cases=[Case(inputs="Paris")]).evaluate(weather_agent())
    page = report.to_html(viewer_url="http://127.0.0.1:9999/")
    run_id = report.cases[0].run_ids[0]
    assert f'href="http://127.0.0.1:9999/runs/{run_id}"' in page
    assert "<script" not in page and "http" not in page.replace("http://127.0.0.1:9999/runs", "")


async def test_html_escapes_model_text() -> None:
    async def evil(text: str) -> str:
        return "<script>alert(1)</script>"

    page = (await Dataset(cases=[Case(inputs="<b>")]).evaluate(evil)).to_html()
    assert "<script>" not in page and "&lt;script&gt;" in page and "&lt;b&gt;" in page


# -- pytest --------------------------------------------------------------------------------

CASES = Dataset(
    cases=[Case(name="hello", inputs="hello", expected_output="HELLO"),
           Case(name="numbers", inputs="a1", expected_output="A1")],
    evaluators=[EqualsExpected(), MaxDuration(5)],
)  # fmt: skip


@CASES.parametrize()
async def test_each_case_is_a_test(case: Case) -> None:
    result = await CASES.check(upper, case)
    assert result.passed and result.name == case.name


def test_parametrize_ids_are_the_case_names(request: pytest.FixtureRequest) -> None:
    marks = [m for m in test_each_case_is_a_test.pytestmark if m.name == "parametrize"]
    assert marks[0].kwargs["ids"] == ["hello", "numbers"]


def test_check_names_the_case_and_each_failure() -> None:
    dataset = Dataset(cases=[Case(name="lower", inputs="a", expected_output="b")],
                      evaluators=[EqualsExpected(), Contains("z")])  # fmt: skip
    with pytest.raises(AssertionError) as caught:
        dataset.check_sync(upper, dataset.cases[0])
    assert str(caught.value) == (
        "case 'lower' failed:\n  - EqualsExpected failed\n"
        "  - Contains failed: 'z' not in the output"
    )


def test_timings_are_measured() -> None:
    def slow(x: int) -> int:
        time.sleep(0.01)
        return x

    report = Dataset(cases=[Case(inputs=1)], evaluators=[MaxDuration(0.001)]).evaluate_sync(slow)
    assert report.cases[0].duration >= 0.01 and not report.cases[0].passed


# The questions dataset pydantic-evals' evals page writes with `to_file` (its newer output spells
# `name: null`, a null input field and an empty top-level `evaluators`), as written.
PYDANTIC_EVALS_QUESTIONS = """\
# yaml-language-server: $schema=questions_cases_schema.json
name: null
cases:
- name: Easy Capital Question
  inputs:
    question: What is the capital of France?
    context: null
  metadata:
    difficulty: easy
    category: Geography
  expected_output:
    answer: Paris
    confidence: 0.95
  evaluators:
  - EqualsExpected
- name: Challenging Landmark Question
  inputs:
    question: Which world-famous landmark is located on the banks of the Seine River?
    context: null
  metadata:
    difficulty: hard
    category: Landmarks
  expected_output:
    answer: Eiffel Tower
    confidence: 0.9
  evaluators:
  - EqualsExpected
evaluators: []
"""


def test_pydantic_evals_questions_file_loads_as_is(tmp_path: Path) -> None:
    path = tmp_path / "questions_cases.yaml"
    path.write_text(PYDANTIC_EVALS_QUESTIONS)
    dataset = Dataset.from_file(path)
    assert dataset.name is None and dataset.evaluators == ()
    first = dataset.cases[0]
    assert first.inputs == {"question": "What is the capital of France?", "context": None}
    assert first.metadata == {"difficulty": "easy", "category": "Geography"}
    answers = {c.inputs["question"]: c.expected_output for c in dataset.cases}
    report = dataset.evaluate_sync(lambda inputs: answers[inputs["question"]])
    assert report.pass_rate == 1.0
    assert [c.assertions["EqualsExpected"].value for c in report.cases] == [True, True]


async def test_a_run_that_waits_on_a_batch_fails_its_case(tmp_path: Path) -> None:
    from agentloop import RunConfig
    from agentloop.providers.openai import OpenAIClient
    from agentloop.store.sqlite import SQLiteStore
    from agentloop.testing import FakeProviderServer, FakeReply

    async with FakeProviderServer(default=FakeReply("x"), batch_after=3600) as server:
        client = OpenAIClient("gpt-test", api_key="sk-test", base_url=server.base_url)
        store = SQLiteStore(tmp_path / "s.db")
        agent = Agent(client, store=store, config=RunConfig(batch=True))
        dataset = Dataset(cases=[Case(name="later", inputs="hi")], evaluators=[Equals("x")])
        report = await dataset.evaluate(agent)
        await agent.aclose()
    (case,) = report.cases
    assert (case.error, case.passed, len(case.run_ids)) == ("RunWaiting", False, 1)
    assert report.totals.errors == 1 and report.pass_rate == 0.0


def test_from_text_reads_json_too() -> None:
    dataset = Dataset.from_text(json.dumps(PYDANTIC_EVALS_JSON), fmt="json")
    assert [c.name for c in dataset.cases][:2] == ["uppercase_basic", "uppercase_with_numbers"]
    with pytest.raises(DatasetError):
        Dataset.from_text("{not json", fmt="json")
