"""Checking arguments against a schema an MCP server listed: the schema is data, never a fetch.

A listed ``inputSchema`` comes from outside, so it is made safe once, here, where it becomes a
validator (issue 25, items 1, 2 and 11):

- ``$ref`` resolves only inside the schema itself and the JSON Schema meta-schemas: the
  ``referencing`` registry we give jsonschema has no retrieval, so an ``http://`` or ``file://``
  reference is never fetched or read. A reference that does not resolve is the soft
  ``Invalid arguments for tool 'x': arguments: its schema refers to '<ref>', which is not part
  of the schema (references are never fetched)`` for a call that reaches it, never a hard error
  (a schema with a reference that leaves the schema is also logged once when it is listed).
- every regular expression (``pattern``, ``patternProperties`` and the property-name test of
  ``additionalProperties``) runs on the ``regex`` engine with a time limit shared by one check
  (``PATTERN_SECONDS``), so a catastrophic pattern gives up instead of freezing the event loop.
  ``unevaluatedProperties`` beside ``patternProperties`` would run patterns on the unbounded
  ``re`` engine inside jsonschema, so such a schema goes unchecked (with a logged warning).
"""

from __future__ import annotations

import contextvars
import functools
import logging
import time
from collections.abc import Iterator, Mapping
from typing import Any

import jsonschema
import jsonschema.exceptions
import jsonschema.protocols
import jsonschema.validators
import referencing
import referencing.exceptions
import regex
from jsonschema_specifications import REGISTRY as META  # type: ignore[import-untyped]

__all__ = ["PATTERN_SECONDS", "argument_problems", "safe_validator", "schema_validator"]

logger = logging.getLogger("agentloop")

PATTERN_SECONDS = 0.25
"""Time all regular expressions of one argument check may take together."""

_MAX_PROBLEM = 200

_DEADLINE: contextvars.ContextVar[float] = contextvars.ContextVar("agentloop_pattern_deadline")

Validator = jsonschema.protocols.Validator


class _Unusable(Exception):
    """The schema cannot check these arguments; ``why`` is the problem text."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


def schema_validator(name: str, schema: Mapping[str, Any]) -> Validator | None:
    """A safe validator for a listed schema (2020-12 unless it says otherwise); None if unusable."""
    validator = safe_validator(schema)
    if isinstance(validator, str):
        logger.warning("MCP tool %r: %s; arguments go unchecked", name, validator)
        return None
    keys = set(_keys(schema))
    outside = sorted(ref for ref in _refs(schema) if not ref.startswith("#") and ref not in META)
    if outside and not keys & {"$id", "id"}:
        logger.warning(
            "MCP tool %r: its schema refers to %s, which is never fetched; a call that needs "
            "it gets an Invalid arguments text",
            name,
            ", ".join(repr(ref[:100]) for ref in outside[:3]),
        )
    return validator


def safe_validator(schema: Mapping[str, Any]) -> Validator | str:
    """A safe validator for a schema from outside, or why the schema cannot check anything."""
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(dict(schema))
    except jsonschema.exceptions.SchemaError:
        return "its schema is not a valid JSON Schema"
    if {"unevaluatedProperties", "patternProperties"} <= set(_keys(schema)):
        return "unevaluatedProperties beside patternProperties cannot be checked with a time limit"
    return _bounded(cls)(dict(schema), registry=referencing.Registry())


def argument_problems(validator: Validator, arguments: Any) -> str:
    """``<field>: <problem>; ...`` for every schema violation, in field order ('' when valid).

    Never raises for a schema's sake: a reference that does not resolve, a pattern past its
    time limit, or a schema that recurses without end is itself the problem text.
    """
    token = _DEADLINE.set(time.monotonic() + PATTERN_SECONDS)
    try:
        problems = list(_problems(validator, arguments))
    except _Unusable as unusable:
        problems = [("arguments", unusable.why)]
    except referencing.exceptions.Unresolvable as exc:
        problems = [("arguments", _unresolved(exc))]
    except RecursionError:
        problems = [("arguments", "its schema refers to itself without end")]
    finally:
        _DEADLINE.reset(token)
    return "; ".join(f"{field}: {problem}" for field, problem in sorted(problems))


def _unresolved(exc: referencing.exceptions.Unresolvable) -> str:
    inner = getattr(exc, "_wrapped", exc)  # jsonschema wraps referencing's own error
    ref = str(getattr(inner, "ref", "") or "?")[:100]
    if isinstance(inner, referencing.exceptions.PointerToNowhere):
        ref = f"#{ref}"  # the JSON pointer inside the schema, as the schema wrote it
    why = f"its schema refers to {ref!r}, which is not part of the schema"
    return f"{why} (references are never fetched)"


def _problems(validator: Validator, arguments: Any) -> Iterator[tuple[str, str]]:
    for error in validator.iter_errors(arguments):
        path = ".".join(str(part) for part in error.absolute_path)
        instance, expected, schema = error.instance, error.validator_value, error.schema
        if error.validator == "required" and isinstance(instance, dict):
            missing = [k for k in expected if k not in instance]  # type: ignore[union-attr]
            yield from ((_join(path, key), "Field required") for key in missing)
        elif (
            error.validator == "additionalProperties"
            and isinstance(instance, dict)
            and isinstance(schema, Mapping)
        ):
            extra = _extras(instance, schema)
            yield from ((_join(path, key), "Extra inputs are not permitted") for key in extra)
        else:
            yield (path or "arguments", error.message[:_MAX_PROBLEM])


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


# -- regular expressions with a time limit -----------------------------------------------------


def _search(pattern: str, text: str) -> bool:
    """``regex.search`` within what is left of this check's time limit."""
    remaining = _DEADLINE.get(time.monotonic() + PATTERN_SECONDS) - time.monotonic()
    too_slow = f"the schema's pattern {pattern[:60]!r} took longer than {PATTERN_SECONDS:g}s"
    if remaining <= 0:
        raise _Unusable(too_slow)
    try:
        return regex.search(pattern, text, timeout=remaining) is not None
    except TimeoutError:
        raise _Unusable(too_slow) from None
    except regex.error as exc:
        raise _Unusable(f"the schema's pattern {pattern[:60]!r} is not usable: {exc}") from None


def _extras(instance: Mapping[str, Any], schema: Mapping[str, Any]) -> list[str]:
    """Properties neither listed in ``properties`` nor matched by a ``patternProperties`` key."""
    known = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    return [
        key
        for key in instance
        if key not in known and not any(_search(pattern, key) for pattern in patterns)
    ]


def _pattern(validator: Any, pattern: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if validator.is_type(instance, "string") and not _search(pattern, instance):
        yield jsonschema.ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(validator: Any, patterns: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if _search(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(
    validator: Any, allowed: Any, instance: Any, schema: Any
) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    extras = _extras(instance, schema)
    if validator.is_type(allowed, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], allowed, path=extra)
    elif not allowed and extras:
        listed = ", ".join(repr(extra) for extra in sorted(extras))
        yield jsonschema.ValidationError(f"Additional properties are not allowed ({listed})")


@functools.cache
def _bounded(cls: type[Validator]) -> type[Validator]:
    """``cls`` with every regular expression on the time-limited engine."""
    keywords = {
        "pattern": _pattern,
        "patternProperties": _pattern_properties,
        "additionalProperties": _additional_properties,
    }
    bounded: type[Validator] = jsonschema.validators.extend(cls, keywords)  # type: ignore[no-untyped-call]
    return bounded


# -- walking a schema --------------------------------------------------------------------------


def _keys(node: Any) -> Iterator[str]:
    """Every key of every object in ``node``."""
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, Mapping):
            yield from (key for key in item if isinstance(key, str))
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def _refs(node: Any) -> Iterator[str]:
    """Every ``$ref`` and ``$dynamicRef`` string in ``node``."""
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, Mapping):
            for key in ("$ref", "$dynamicRef"):
                if isinstance(item.get(key), str):
                    yield item[key]
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
