"""LLMReflector: one request per failure, strict JSON, validated input fixes."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import pytest

from agentloop.errors import ProviderUnavailable, ReflectionError
from agentloop.messages import Message
from agentloop.model import ModelRequest, ModelResponse, ModelSettings, StreamEvent
from agentloop.safety.recovery import Correction, FailureAnalysis, Reflector, ToolFailure
from agentloop.safety.reflector import (
    REFLECTOR_SYSTEM_PROMPT,
    LLMReflector,
    parse_analysis,
    reflection_message,
)


class FakeModel:
    """A FunctionModel-like client: ``fn(request) -> reply text`` (or an exception to raise)."""

    def __init__(self, fn: Callable[[ModelRequest], str | Exception]) -> None:
        self.fn = fn
        self.requests: list[ModelRequest] = []

    @property
    def model(self) -> str:
        return "fake"

    @property
    def provider(self) -> str:
        return "test"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        out = self.fn(request)
        if isinstance(out, Exception):
            raise out
        return ModelResponse(Message.assistant(out), model="fake")

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        raise NotImplementedError
        yield  # pragma: no cover

    async def aclose(self) -> None:
        return None


def reply(**overrides: Any) -> str:
    body: dict[str, Any] = {
        "is_recoverable": True,
        "root_cause": "typo in the path",
        "severity": "low",
        "correction": {
            "kind": "input_fix",
            "arguments": {"path": "src/main.rs"},
            "tool": None,
            "guidance": None,
        },
    }
    body.update(overrides)
    return json.dumps(body)


def failure(
    schema: Mapping[str, Any] | None = None,
    validate: Callable[[Mapping[str, Any]], str | None] | None = None,
) -> ToolFailure:
    return ToolFailure(
        tool="read_file",
        arguments={"path": "src/mian.rs"},
        error_text="file not found: src/mian.rs",
        schema=schema,
        attempt=0,
        validate=validate,
    )


def test_is_a_reflector() -> None:
    assert isinstance(LLMReflector(FakeModel(lambda r: reply())), Reflector)


async def test_one_request_per_failure_with_the_analysis_parsed() -> None:
    model = FakeModel(lambda request: reply())
    settings = ModelSettings(temperature=0.0)
    analysis = await LLMReflector(model, settings=settings).analyze(failure())
    assert analysis == FailureAnalysis(
        is_recoverable=True,
        root_cause="typo in the path",
        severity="low",
        correction=Correction(kind="input_fix", arguments={"path": "src/main.rs"}),
    )
    assert len(model.requests) == 1
    request = model.requests[0]
    assert request.system == REFLECTOR_SYSTEM_PROMPT and request.settings == settings
    assert "is_recoverable" in REFLECTOR_SYSTEM_PROMPT and "false" in REFLECTOR_SYSTEM_PROMPT


def test_the_message_lines() -> None:
    schema = {"type": "object", "properties": {"path": {"type": "string"}}}
    text = reflection_message(failure(schema))
    assert text.splitlines() == [
        "Tool: read_file",
        'Input: {"path":"src/mian.rs"}',
        'Schema: {"properties":{"path":{"type":"string"}},"type":"object"}',
        "Error: file not found: src/mian.rs",
        "Attempt: 1 of 5",
    ]


def test_the_schema_line_is_omitted_when_unknown() -> None:
    assert not any(
        line.startswith("Schema:") for line in reflection_message(failure()).splitlines()
    )


def test_a_not_recoverable_reply_without_correction() -> None:
    analysis = parse_analysis(reply(is_recoverable=False, severity="high", correction=None))
    assert analysis == FailureAnalysis(False, "typo in the path", "high", None)


def test_surrounding_blanks_are_tolerated() -> None:
    assert parse_analysis("\n  " + reply() + "\n").is_recoverable


@pytest.mark.parametrize(
    "text",
    [
        "",
        "I think the path is wrong.",
        "```json\n" + reply() + "\n```",
        reply() + " trailing",
        reply(severity="catastrophic"),
        reply(is_recoverable="yes"),
        reply(extra="field"),
        json.dumps({"is_recoverable": True, "root_cause": "x", "severity": "low"}),
        reply(correction={"kind": "input_fix", "arguments": {"p": 1}, "tool": None}),
        reply(correction={"kind": "rewrite", "arguments": None, "tool": None, "guidance": None}),
        reply(correction={"kind": "input_fix", "arguments": None, "tool": None, "guidance": None}),
        reply(correction={"kind": "tool_change", "arguments": None, "tool": "", "guidance": None}),
        reply(correction={"kind": "guidance", "arguments": None, "tool": None, "guidance": None}),
        "[1, 2]",
    ],
)
def test_anything_but_exactly_the_json_raises(text: str) -> None:
    with pytest.raises(ReflectionError):
        parse_analysis(text)


def test_tool_change_and_guidance_corrections() -> None:
    change = {"kind": "tool_change", "arguments": None, "tool": "read", "guidance": None}
    assert parse_analysis(reply(correction=change)).correction == Correction(
        kind="tool_change", tool="read"
    )
    advice = {"kind": "guidance", "arguments": None, "tool": None, "guidance": "list first"}
    assert parse_analysis(reply(correction=advice)).correction == Correction(
        kind="guidance", guidance="list first"
    )


async def test_an_input_fix_is_validated_against_the_schema() -> None:
    seen: list[Mapping[str, Any]] = []

    def validate(arguments: Mapping[str, Any]) -> str | None:
        seen.append(arguments)
        return None if arguments.get("path") == "src/main.rs" else "path: not a known file"

    model = FakeModel(lambda request: reply())
    assert (await LLMReflector(model).analyze(failure(validate=validate))).is_recoverable
    assert seen == [{"path": "src/main.rs"}]
    bad = reply(
        correction={"kind": "input_fix", "arguments": {"path": 3}, "tool": None, "guidance": None}
    )
    with pytest.raises(ReflectionError, match="path: not a known file"):
        await LLMReflector(FakeModel(lambda request: bad)).analyze(failure(validate=validate))


async def test_a_failed_request_is_a_reflection_error() -> None:
    model = FakeModel(lambda request: ProviderUnavailable("down", provider="test"))
    with pytest.raises(ReflectionError) as info:
        await LLMReflector(model).analyze(failure())
    assert isinstance(info.value.__cause__, ProviderUnavailable)


async def test_a_garbage_reply_raises() -> None:
    with pytest.raises(ReflectionError):
        await LLMReflector(FakeModel(lambda request: "sure!")).analyze(failure())


def test_repr_names_the_model() -> None:
    assert repr(LLMReflector(FakeModel(lambda r: ""))) == "LLMReflector(model='fake')"
