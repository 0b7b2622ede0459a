"""Typed output: the schema the model is given and the validation of its answer.

``OutputType`` wraps an ``output_type`` (a pydantic model, a dataclass, a TypedDict or a plain
type such as ``int`` or ``list[str]``) in a pydantic ``TypeAdapter``. In ``"tool"`` mode the
model answers by calling ``final_result``, whose parameters are the output schema (a type whose
schema is not an object is wrapped in one field, ``result``); in ``"native"`` and ``"text"``
mode it answers with JSON text. Every invalid answer becomes ``InvalidOutput`` whose text the
model reads (``Invalid output: <field>: <problem>; ...``).

The answer is checked here, where it enters, for every place it goes next: a value nested more
than ``MAX_ARGUMENT_DEPTH`` levels (the limit tool arguments have) is ``Invalid output: nested
more than 64 levels deep``, since ``Run.to_dict`` and the store could not encode it; a
validator of the output type that raises something other than pydantic's errors (a
``TypeError``, say) is a panic: logged with its traceback, and ``Invalid output: the output
type's validator raised <Class>: <message>`` for the model to read.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeAlias, TypeVar

from pydantic import ValidationError

from agentloop._schema import format_problems
from agentloop._util.depth import _too_deep
from agentloop.errors import ConfigurationError
from agentloop.messages import MAX_ARGUMENT_DEPTH
from agentloop.model import INVALID_JSON_KEY, ModelResponse, OutputSpec, ToolSpec
from agentloop.run import TRUNCATION_REASONS

if TYPE_CHECKING:  # pydantic's TypeAdapter loads for the first typed output, not at import
    from pydantic import TypeAdapter

__all__ = [
    "CUT_CALL_TEXT",
    "FINAL_RESULT",
    "NOT_EXECUTED_TEXT",
    "TRUNCATED_TEXT",
    "InvalidOutput",
    "OutputMode",
    "OutputType",
    "cut_calls",
]

T = TypeVar("T")

OutputMode: TypeAlias = Literal["tool", "native", "text"]

FINAL_RESULT = "final_result"
TRUNCATED_TEXT = "Invalid output: the reply was cut off at the output token limit"
CALL_FINAL_RESULT_TEXT = f"Reply by calling '{FINAL_RESULT}' with your answer."
ACCEPTED_TEXT = "Final result accepted."
NOT_EXECUTED_TEXT = f"not executed: the run ended with '{FINAL_RESULT}'"
TOO_DEEP_TEXT = f"Invalid output: nested more than {MAX_ARGUMENT_DEPTH} levels deep"

logger = logging.getLogger("agentloop")


class InvalidOutput(Exception):
    """An answer that failed validation; ``text`` is what the model reads."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


class OutputType(Generic[T]):
    """One agent's output type: its schemas and the validation of an answer."""

    def __init__(self, output_type: type[T]) -> None:
        from pydantic import TypeAdapter

        try:
            self.adapter: TypeAdapter[T] = TypeAdapter(output_type)
            schema = self.adapter.json_schema()
        except Exception as exc:
            raise ConfigurationError(
                f"output_type {output_type!r} cannot be described as a JSON schema: {exc}",
                field="output_type",
            ) from exc
        self.name = getattr(output_type, "__name__", None) or "output"
        self.is_text = output_type is str
        self.schema: dict[str, Any] = schema
        self.wrapped = schema.get("type") != "object"
        self.tool_spec = ToolSpec(FINAL_RESULT, self._description(), self._parameters())
        self.spec = OutputSpec(name=_schema_name(self.name), schema=schema)

    def _description(self) -> str:
        doc = self.schema.get("description")
        what = f" ({doc})" if isinstance(doc, str) and doc else ""
        return f"Give your final answer{what}. Call this once, when you are done."

    def _parameters(self) -> dict[str, Any]:
        if not self.wrapped:
            return self.schema
        inner = dict(self.schema)
        defs = inner.pop("$defs", None)
        wrapped: dict[str, Any] = {
            "type": "object",
            "properties": {"result": inner},
            "required": ["result"],
        }
        if defs is not None:
            wrapped["$defs"] = defs
        return wrapped

    def from_arguments(self, arguments: Mapping[str, Any]) -> T:
        """The value of a ``final_result`` call's arguments."""
        if INVALID_JSON_KEY in arguments and len(arguments) == 1:
            raw = f"{arguments[INVALID_JSON_KEY]!s:.200}"
            raise InvalidOutput(f"Invalid output: arguments: not valid JSON: {raw}")
        if _too_deep(arguments):  # also the tree ToolCallPart cut: its deepest level is empty
            raise InvalidOutput(TOO_DEEP_TEXT)
        if self.wrapped:
            if "result" not in arguments:
                raise InvalidOutput("Invalid output: result: Field required")
            return self._validated(arguments["result"], prefix="result")
        return self._validated(arguments)

    def from_text(self, text: str) -> T:
        """The value of a JSON answer in the reply text (a ```json fence is allowed)."""
        if self.is_text:
            return self._validated(text)
        body = _unfenced(text)
        import json  # loads with the first text answer, not at import

        try:
            value = json.loads(body)
        except (ValueError, RecursionError):
            raise InvalidOutput(
                f"Invalid output: the reply is not JSON; reply with only a JSON value "
                f"matching the {self.name} schema"
            ) from None
        if _too_deep({"result": value}):  # counted as the wrapped tool-mode answer is
            raise InvalidOutput(TOO_DEEP_TEXT)
        return self._validated(value)

    def _validated(self, value: Any, prefix: str = "") -> T:
        try:
            return self.adapter.validate_python(value)
        except ValidationError as exc:
            problems = format_problems(exc, prefix or "output")
            if prefix:
                problems = "; ".join(
                    p if p.startswith(prefix) else f"{prefix}.{p}" for p in problems.split("; ")
                )
            raise InvalidOutput(f"Invalid output: {problems}") from None
        except Exception as exc:  # a validator's own bug (pydantic passes TypeError on): a panic
            logger.warning("the output type's validator panicked", exc_info=exc)
            from agentloop.engine.invoke import said

            message = said(exc)[:200]
            raise InvalidOutput(
                f"Invalid output: the output type's validator raised {type(exc).__name__}: "
                f"{message}"
            ) from None

    def instructions(self) -> str:
        """What ``"text"`` mode adds to the system prompt."""
        import json

        return "Reply with only a JSON value (no prose) matching this JSON schema:\n" + json.dumps(
            self.schema, separators=(",", ":")
        )


def _unfenced(text: str) -> str:
    body = text.strip()
    if body.startswith("```"):
        body = body[3:]
        newline = body.find("\n")
        body = body[newline + 1 :] if newline >= 0 else ""
        end = body.rfind("```")
        if end >= 0:
            body = body[:end]
    return body.strip()


def _schema_name(name: str) -> str:
    cleaned = "".join(c if c.isalnum() or c in "_-" else "_" for c in name)
    return cleaned[:64] or "output"


CUT_CALL_TEXT = (
    "tool call '{name}' was cut off at the output token limit and did not run; make it smaller"
)
"""What the model reads for a tool call its reply was cut off in the middle of (SPEC 16)."""


def cut_calls(response: ModelResponse) -> Mapping[str, str]:
    """The calls a reply cut at the output limit left unfinished, each with its soft text.

    A call is cut when the reply stopped at the limit (``TRUNCATION_REASONS``) and its arguments
    never became a JSON object (the adapter kept the raw text under ``INVALID_JSON_KEY``). It
    never runs; the model reads ``CUT_CALL_TEXT`` and the run goes on (SPEC 16).
    """
    if response.stop_reason not in TRUNCATION_REASONS:
        return _NO_CUTS
    return {
        c.id: CUT_CALL_TEXT.format(name=c.name)
        for c in response.tool_calls
        if INVALID_JSON_KEY in c.arguments
    }


_NO_CUTS: Mapping[str, str] = MappingProxyType({})
