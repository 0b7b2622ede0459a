"""``LLMJudge``: one request to any of our model clients, one strict JSON verdict back.

The judge reads the rubric, the output (and the input when ``include_input``) and must answer
``{"reason": str, "pass": bool, "score": 0..1}`` (a fenced JSON block is accepted). Anything
else is the evaluator failure ``judge reply did not parse: <first 200 chars>``: never a pass.
The verdict is an assertion under the evaluator's name and a score under ``<name>_score``.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import KW_ONLY, dataclass
from typing import Any

from agentloop.evals._evaluators import EvaluationReason, Evaluator, EvaluatorContext
from agentloop.messages import Message
from agentloop.model import ModelClient, ModelRequest

__all__ = ["JUDGE_SYSTEM", "JudgeReplyError", "LLMJudge", "parse_verdict"]

JUDGE_SYSTEM = (
    "You grade the output of an AI system against a rubric. Answer with one JSON object and "
    'nothing else: {"reason": "<one or two sentences>", "pass": true or false, '
    '"score": <a number from 0 to 1>}.'
)
_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)


class JudgeReplyError(Exception):
    """The judge's reply is not the verdict asked for (its text is the failure, as is)."""


def parse_verdict(text: str) -> tuple[bool, float, str]:
    """``(pass, score, reason)`` from a judge's reply, or ``JudgeReplyError``."""
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced is not None:
        body = fenced.group(1)
    try:
        data = json.loads(body)
    except ValueError:
        data = None
    ok = isinstance(data, dict)
    passed = data.get("pass") if ok else None
    score = data.get("score") if ok else None
    reason = data.get("reason") if ok else None
    number = isinstance(score, int | float) and not isinstance(score, bool)
    if not (number and isinstance(passed, bool) and isinstance(reason, str)):
        raise JudgeReplyError(f"judge reply did not parse: {text[:200]}")
    value = float(score)  # type: ignore[arg-type]  # a number: checked above
    if not 0 <= value <= 1:
        raise JudgeReplyError(f"judge reply did not parse: {text[:200]}")
    return passed, value, reason


@dataclass(frozen=True)
class LLMJudge(Evaluator):
    """Ask a model whether the output meets ``rubric``.

    ``client`` is any ``ModelClient`` or a ``"provider:model"`` string (resolved when the judge
    first runs, so a dataset file loads without a key); pydantic-evals files say ``model:``.
    """

    rubric: str
    _: KW_ONLY
    client: ModelClient | str | None = None
    include_input: bool = False
    model: str | None = None
    evaluation_name: str | None = None
    include_expected_output: bool = False
    model_settings: dict[str, Any] | None = None
    """Accepted from pydantic-evals files; the judge's request uses the client's settings."""
    score: Any = None
    """Accepted from pydantic-evals files; the verdict is always an assertion and a score."""
    assertion: Any = None
    """Accepted from pydantic-evals files (see ``score``)."""

    def spec(self) -> Any:
        """A file keeps a string client only (a client object has no file form)."""
        given: dict[str, Any] = {"rubric": self.rubric}
        model = self.client if isinstance(self.client, str) else self.model
        if model:
            given["model"] = model
        if self.include_input:
            given["include_input"] = True
        if self.include_expected_output:
            given["include_expected_output"] = True
        return {"LLMJudge": given if len(given) > 1 else self.rubric}

    @functools.cached_property
    def _client(self) -> ModelClient:
        """The client, resolved once (a string builds one client for every case)."""
        from agentloop.config import resolve_client
        from agentloop.errors import ConfigurationError

        chosen = self.client if self.client is not None else self.model
        if chosen is None:
            raise ConfigurationError("LLMJudge needs client= (a ModelClient or 'provider:model')")
        return resolve_client(chosen)

    def prompt(self, ctx: EvaluatorContext) -> str:
        """The one user message the judge reads."""
        parts = [f"<rubric>\n{self.rubric}\n</rubric>"]
        if self.include_input:
            parts.append(f"<input>\n{_text(ctx.inputs)}\n</input>")
        if self.include_expected_output:
            parts.append(f"<expected_output>\n{_text(ctx.expected_output)}\n</expected_output>")
        parts.append(f"<output>\n{_text(ctx.output)}\n</output>")
        return "\n".join(parts)

    async def evaluate(self, ctx: EvaluatorContext) -> dict[str, EvaluationReason]:
        """One request; the verdict as an assertion and a score."""
        request = ModelRequest(messages=(Message.user(self.prompt(ctx)),), system=JUDGE_SYSTEM)
        response = await self._client.complete(request)
        passed, score, reason = parse_verdict(response.text)
        name = self.result_name()
        return {
            name: EvaluationReason(passed, reason),
            f"{name}_score": EvaluationReason(score, reason),
        }


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        from pydantic_core import to_json

        return to_json(value, fallback=repr).decode()
    except (TypeError, ValueError):
        return repr(value)
