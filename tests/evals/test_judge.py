"""``LLMJudge`` (SPEC 23) through a real client over HTTP to the fake server: one request, a
strict verdict, and an unparseable reply that is a failure, never a pass."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentloop.evals import Case, Dataset, LLMJudge
from agentloop.evals._judge import JudgeReplyError, parse_verdict
from agentloop.providers.openai import OpenAIClient
from agentloop.testing import FakeProviderServer, FakeReply, Fault

VERDICT = {"reason": "names Paris", "pass": True, "score": 0.9}


async def answer(inputs: str) -> str:
    return f"Paris is the capital of {inputs}"


async def judged(reply: str | Fault | FakeReply, evaluator_timeout: float = 30.0,
                 **options: Any) -> Any:  # fmt: skip
    step = FakeReply(reply) if isinstance(reply, str) else reply
    async with FakeProviderServer([step]) as server:
        client = OpenAIClient("judge", api_key="k", base_url=server.base_url)
        try:
            judge = LLMJudge("The answer names the right capital", client=client, **options)
            dataset = Dataset(cases=[Case(name="france", inputs="France")], evaluators=[judge])
            report = await dataset.evaluate(answer, evaluator_timeout=evaluator_timeout)
        finally:
            await client.aclose()
        return report.cases[0], server.requests


async def test_a_passing_verdict_is_an_assertion_and_a_score() -> None:
    verdict = json.dumps({"reason": "names Paris", "pass": True, "score": 0.9})
    case, requests = await judged(verdict, include_input=True)
    assert len(requests) == 1
    prompt = requests[0]["messages"][-1]["content"]
    assert "<rubric>" in prompt and "France" in prompt and "Paris is the capital" in prompt
    assert requests[0]["messages"][0]["role"] == "system"
    assert case.passed
    assert (case.assertions["LLMJudge"].value, case.assertions["LLMJudge"].reason) == (
        True, "names Paris"
    )  # fmt: skip
    assert case.scores["LLMJudge_score"].value == 0.9


async def test_the_input_is_left_out_unless_asked() -> None:
    verdict = json.dumps({"reason": "wrong", "pass": False, "score": 0})
    case, requests = await judged(f"```json\n{verdict}\n```")
    assert "France" not in requests[0]["messages"][-1]["content"].split("<output>")[0]
    assert not case.passed and case.assertions["LLMJudge"].value is False


@pytest.mark.parametrize(
    "reply",
    [
        "Looks good to me!",
        json.dumps({"reason": "ok", "pass": "yes", "score": 1}),
        json.dumps({"reason": "ok", "pass": True, "score": 7}),
        json.dumps({"pass": True, "score": 1}),
        json.dumps({"reason": "ok", "pass": True, "score": True}),
    ],
)
async def test_an_unparseable_reply_is_a_failure_never_a_pass(reply: str) -> None:
    case, _ = await judged(reply)
    assert case.evaluator_failures == {"LLMJudge": f"judge reply did not parse: {reply[:200]}"}
    assert not case.passed and case.assertions == {}


def test_the_failure_quotes_the_first_200_characters() -> None:
    with pytest.raises(JudgeReplyError) as caught:
        parse_verdict("x" * 500)
    assert str(caught.value) == "judge reply did not parse: " + "x" * 200


def test_a_file_judge_takes_a_model_string_and_needs_no_key_to_load() -> None:
    dataset = Dataset.from_text(
        "cases: [{inputs: a}]\nevaluators:\n"
        "- LLMJudge: {rubric: be kind, model: 'openai:gpt-4o-mini', include_input: true}"
    )
    judge = dataset.evaluators[0]
    assert isinstance(judge, LLMJudge) and judge.model == "openai:gpt-4o-mini"
    assert judge.spec() == {
        "LLMJudge": {"rubric": "be kind", "model": "openai:gpt-4o-mini", "include_input": True}
    }


def test_pydantic_evals_judge_options_load() -> None:
    dataset = Dataset.from_text(
        "cases: [{inputs: a, expected_output: b}]\nevaluators:\n"
        "- LLMJudge: {rubric: r, model: 'openai:gpt-4o', include_expected_output: true,\n"
        "    model_settings: {temperature: 0}, score: {include_reason: true},\n"
        "    assertion: false}"
    )
    judge = dataset.evaluators[0]
    assert isinstance(judge, LLMJudge) and judge.include_expected_output
    from agentloop.evals import EvaluatorContext

    ctx = EvaluatorContext("c", "a", None, "b", "out", 0.0)
    assert "<expected_output>\nb\n</expected_output>" in judge.prompt(ctx)


async def test_a_judge_whose_provider_refuses_is_a_failure_never_a_pass() -> None:
    case, requests = await judged(Fault.auth())
    (failure,) = case.evaluator_failures.values()
    assert failure.startswith("AuthError: ") and len(requests) == 1
    assert not case.passed and case.assertions == {} and case.error is None


async def test_a_judge_that_outlives_the_evaluator_timeout_is_a_failure() -> None:
    case, _ = await judged(FakeReply(json.dumps(VERDICT), delay=5.0), evaluator_timeout=0.2)
    assert case.evaluator_failures == {"LLMJudge": "timed out after 0.2s"}
    assert not case.passed and case.assertions == {}
