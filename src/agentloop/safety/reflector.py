"""``LLMReflector``: ask a model why a tool call failed, as strict JSON.

One request per failed attempt. The reply must be exactly the JSON object the system prompt
describes; anything else raises ``ReflectionError``, which the engine treats as ``Fail`` (a
reflector never guesses). A proposed ``input_fix`` is checked against the tool's schema
before anyone retries with it.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from agentloop.errors import ProviderError, ReflectionError
from agentloop.messages import Message
from agentloop.model import ModelClient, ModelRequest, ModelSettings
from agentloop.safety.loops import canonical_arguments
from agentloop.safety.recovery import Correction, FailureAnalysis, ToolFailure

__all__ = ["REFLECTOR_SYSTEM_PROMPT", "LLMReflector", "parse_analysis", "reflection_message"]

REFLECTOR_SYSTEM_PROMPT = """\
You analyse one failed tool call made by an AI agent and decide whether retrying can help.
Answer with exactly one JSON object and nothing else (no prose, no code fences):
{"is_recoverable": <true|false>,
 "root_cause": "<one sentence>",
 "severity": "<low|medium|high|critical>",
 "correction": null or {"kind": "<input_fix|tool_change|guidance>",
                        "arguments": <object with the complete corrected input, or null>,
                        "tool": "<name of another tool to call instead, or null>",
                        "guidance": "<advice, or null>"}}
Rules: "input_fix" needs "arguments" that satisfy the schema; "tool_change" needs "tool";
"guidance" needs "guidance". Prefer "is_recoverable": false over inventing a fix: only propose
a correction you are confident about, and never retry a failure the same input will repeat."""


class _CorrectionReply(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    kind: Literal["input_fix", "tool_change", "guidance"]
    arguments: dict[str, Any] | None
    tool: str | None
    guidance: str | None


class _AnalysisReply(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    is_recoverable: bool
    root_cause: str
    severity: Literal["low", "medium", "high", "critical"]
    correction: _CorrectionReply | None


def reflection_message(failure: ToolFailure) -> str:
    """The analyst's user message.

    Lines ``Tool:``, ``Input:``, ``Schema:`` (omitted when unknown), ``Error:``, ``Attempt:``.
    """
    lines = [f"Tool: {failure.tool}", f"Input: {canonical_arguments(failure.arguments)}"]
    if failure.schema is not None:
        lines.append(f"Schema: {canonical_arguments(failure.schema)}")
    lines.append(f"Error: {failure.error_text}")
    lines.append(f"Attempt: {failure.attempt + 1} of {failure.max_attempts}")
    return "\n".join(lines)


def parse_analysis(text: str) -> FailureAnalysis:
    """Parse a reply that must be exactly the analysis JSON (surrounding blanks allowed).

    Raises:
        ReflectionError: the reply is not that JSON, or a correction lacks what its kind needs.
    """
    try:
        reply = _AnalysisReply.model_validate_json(text.strip())
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in error['loc']) or 'reply'}: {error['msg']}"
            for error in exc.errors()
        )
        raise ReflectionError(f"reflector reply is not the expected JSON: {problems}") from exc
    correction = None if reply.correction is None else _correction(reply.correction)
    return FailureAnalysis(
        is_recoverable=reply.is_recoverable,
        root_cause=reply.root_cause,
        severity=reply.severity,
        correction=correction,
    )


def _correction(reply: _CorrectionReply) -> Correction:
    needs = {"input_fix": reply.arguments, "tool_change": reply.tool, "guidance": reply.guidance}
    field = {"input_fix": "arguments", "tool_change": "tool", "guidance": "guidance"}[reply.kind]
    if needs[reply.kind] is None or needs[reply.kind] == "":
        raise ReflectionError(f"a {reply.kind} correction needs a non-empty {field!r}")
    return Correction(
        kind=reply.kind, arguments=reply.arguments, tool=reply.tool, guidance=reply.guidance
    )


class LLMReflector:
    """A ``Reflector`` that asks a model for the analysis.

    Args:
        client: any ``ModelClient``; the request uses its default model.
        settings: options for the analysis request (defaults to ``ModelSettings()``).
    """

    def __init__(self, client: ModelClient, *, settings: ModelSettings | None = None) -> None:
        self.client = client
        self.settings = settings or ModelSettings()

    def __repr__(self) -> str:
        return f"LLMReflector(model={self.client.model!r})"

    async def analyze(self, failure: ToolFailure) -> FailureAnalysis:
        """Send one analysis request and parse the reply strictly.

        Raises:
            ReflectionError: the request failed, the reply is not the expected JSON, or the
                proposed ``input_fix`` does not satisfy the tool's schema.
        """
        request = ModelRequest(
            messages=(Message.user(reflection_message(failure)),),
            system=REFLECTOR_SYSTEM_PROMPT,
            settings=self.settings,
        )
        try:
            response = await self.client.complete(request)
        except ProviderError as exc:
            raise ReflectionError(f"reflector request failed: {exc}") from exc
        analysis = parse_analysis(response.text)
        correction = analysis.correction
        if correction is not None and correction.kind == "input_fix":
            _check_arguments(failure, correction)
        return analysis


def _check_arguments(failure: ToolFailure, correction: Correction) -> None:
    if failure.validate is None or correction.arguments is None:
        return
    problem = failure.validate(correction.arguments)
    if problem is not None:
        arguments = canonical_arguments(correction.arguments)
        raise ReflectionError(f"proposed arguments {arguments} are invalid: {problem}")
