"""JSON schema and argument validation for function tools, built by pydantic from type hints.

One pydantic model per tool, built once at decoration time; validation at call time is one
``model_validate`` call. Docstring parameter descriptions (Google ``Args:`` or reST ``:param``)
become field descriptions.

It sits beneath ``agentloop.tools`` and knows nothing of tools: the caller says which annotation
is the tool context (``is_context``), so a context parameter out of place is named here without
this module importing ``ToolContext``.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping
from typing import Any, get_type_hints

import pydantic
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agentloop.errors import ConfigurationError

__all__ = ["ArgumentModel", "build_argument_model", "format_validation_error", "split_docstring"]

_SECTION = re.compile(
    r"^\s*(Args|Arguments|Parameters|Returns|Raises|Yields|Examples?|Notes?):\s*$"
)
_GOOGLE_PARAM = re.compile(r"^\s*(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_REST_PARAM = re.compile(r"^\s*:param\s+(?:[\w\[\], |.]+\s+)?(\w+)\s*:\s*(.*)$")


class ArgumentModel(BaseModel):
    """Base of every generated argument model: unknown keys are errors, not silently dropped."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=False)


def split_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a docstring into its description and its per-parameter descriptions."""
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    description: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    for line in lines:
        rest = _REST_PARAM.match(line)
        if rest:
            current = rest.group(1)
            params[current] = rest.group(2).strip()
            continue
        header = _SECTION.match(line)
        if header:
            section, current = header.group(1), None
            continue
        if section in ("Args", "Arguments", "Parameters"):
            current = _add_param_line(line, params, current)
        elif section is None and not line.lstrip().startswith(":"):
            description.append(line)
    return "\n".join(description).strip(), params


def _add_param_line(line: str, params: dict[str, str], current: str | None) -> str | None:
    match = _GOOGLE_PARAM.match(line)
    indent = len(line) - len(line.lstrip())
    if match and indent <= 4:
        name = match.group(1).lstrip("*")
        params[name] = match.group(2).strip()
        return name
    if current and line.strip():
        params[current] = f"{params[current]} {line.strip()}".strip()
    return current


def build_argument_model(
    func: Callable[..., Any],
    tool_name: str,
    skip_first: bool,
    *,
    is_context: Callable[[Any], bool],
) -> tuple[type[ArgumentModel], dict[str, Any], str]:
    """Build (argument model, JSON schema, description) for ``func``.

    ``skip_first`` leaves out the first parameter (the tool context); ``is_context`` tells a
    context annotation, which is refused anywhere else.

    Raises ``ConfigurationError`` naming the parameter for *args/**kwargs, a missing
    annotation, a context parameter out of place, or an annotation pydantic cannot turn into a
    JSON schema.
    """
    description, param_docs = split_docstring(func.__doc__)
    try:
        hints = get_type_hints(func, include_extras=True)
    except Exception as exc:
        raise ConfigurationError(
            f"tool '{tool_name}': cannot resolve type hints: {exc}", field="annotations"
        ) from exc
    params = list(inspect.signature(func).parameters.values())
    if skip_first:
        params = params[1:]
    fields: dict[str, Any] = {}
    for param in params:
        fields[param.name] = _field_for(param, hints, param_docs, tool_name, is_context)
    try:
        model = pydantic.create_model(f"{tool_name}_arguments", __base__=ArgumentModel, **fields)
        schema = model.model_json_schema()
    except _SCHEMA_ERRORS as exc:
        name = _culprit(fields, tool_name) or "annotations"
        raise ConfigurationError(
            f"tool '{tool_name}': parameter '{name}' has a type that cannot be described as "
            f"JSON ({type(exc).__name__})",
            field=name,
        ) from exc
    schema.pop("title", None)
    return model, schema, description


_SCHEMA_ERRORS = (pydantic.PydanticSchemaGenerationError, pydantic.PydanticUserError, TypeError)


def _culprit(fields: Mapping[str, Any], tool_name: str) -> str | None:
    """The first parameter whose type alone cannot become a JSON schema."""
    for name, spec in fields.items():
        try:
            pydantic.create_model(
                f"{tool_name}_{name}", __base__=ArgumentModel, **{name: spec}
            ).model_json_schema()
        except _SCHEMA_ERRORS:
            return name
    return None


def _field_for(
    param: inspect.Parameter,
    hints: Mapping[str, Any],
    docs: Mapping[str, str],
    tool_name: str,
    is_context: Callable[[Any], bool],
) -> tuple[Any, Any]:
    if param.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
        raise ConfigurationError(
            f"tool '{tool_name}': parameter '{param.name}' must not be *args or **kwargs",
            field=param.name,
        )
    if param.name not in hints:
        raise ConfigurationError(
            f"tool '{tool_name}': parameter '{param.name}' needs a type annotation",
            field=param.name,
        )
    if is_context(hints[param.name]):
        raise ConfigurationError(
            f"tool '{tool_name}': the ToolContext parameter '{param.name}' must be the "
            "function's first parameter",
            field=param.name,
        )
    default = ... if param.default is inspect.Parameter.empty else param.default
    return (hints[param.name], Field(default, description=docs.get(param.name)))


def format_validation_error(tool_name: str, error: ValidationError) -> str:
    """``Invalid arguments for tool 'x': <field>: <problem>; ...``."""
    return f"Invalid arguments for tool '{tool_name}': " + format_problems(error, "arguments")


def format_problems(error: ValidationError, whole: str) -> str:
    """``<field>: <problem>; ...`` (``whole`` names a problem of the value itself)."""
    problems = []
    for item in error.errors(include_url=False, include_context=False, include_input=False):
        loc = ".".join(str(part) for part in item["loc"]) or whole
        problems.append(f"{loc}: {item['msg']}")
    return "; ".join(problems)
