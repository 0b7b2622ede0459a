"""Tool arguments no validator needs to see: every parameter a required, unconstrained ``str``.

A tool such as ``async def lookup(key: str)`` is the common one. For its argument model,
pydantic's validator accepts exactly a dict with those keys whose values are ``str`` (a ``str``
subclass becomes a ``str``), and answers those same objects in the parameters' order. A call
whose arguments are that (each value's type exactly ``str``, no other key) takes them as they
are, without the validator, its model instance and the copies around it (about 0.7 us a call,
issue 39); anything else goes to the validator, which decides and words every error.

Which models qualify is read from the model's core schema, once per tool: a model with no
validator, no alias, no default and no constraint on any field, whose only setting is
``extra="forbid"``. ``tests/test_plain_args.py`` holds the shortcut to the validator.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["plain_arguments", "plain_fields"]

_MODEL_KEYS = frozenset({"cls", "config", "custom_init", "metadata", "ref", "root_model"})
_MODEL_KEYS |= {"schema", "type"}
_FIELDS_KEYS = frozenset({"type", "fields", "computed_fields", "model_name"})
_FIELD_KEYS = frozenset({"type", "schema", "metadata"})
_CONFIG_KEYS = frozenset({"extra_fields_behavior", "title"})
_PLAIN_STR = {"type": "str"}


def plain_fields(model: type) -> tuple[str, ...] | None:
    """The parameters of ``model`` in order when each is a required plain ``str``; else None."""
    schema = getattr(model, "__pydantic_core_schema__", None)
    if type(schema) is not dict or schema.get("type") != "model" or set(schema) - _MODEL_KEYS:
        return None
    config = schema.get("config", {})
    if schema.get("custom_init") or schema.get("root_model") or set(config) - _CONFIG_KEYS:
        return None
    inner = schema.get("schema")
    if config.get("extra_fields_behavior") != "forbid" or type(inner) is not dict:
        return None
    if inner.get("type") != "model-fields" or set(inner) - _FIELDS_KEYS:
        return None
    if inner.get("computed_fields"):
        return None
    names: list[str] = []
    for name, field in inner["fields"].items():
        if set(field) - _FIELD_KEYS or field.get("type") != "model-field":
            return None
        if field.get("schema") != _PLAIN_STR:
            return None
        names.append(name)
    return tuple(names)


def plain_arguments(names: tuple[str, ...], arguments: Mapping[str, Any]) -> dict[str, Any] | None:
    """The call's arguments as the validator would answer them (a new dict), or None.

    None: not exactly ``names``, each a ``str``; then the validator decides.
    """
    if len(arguments) != len(names):
        return None
    valid: dict[str, Any] = {}
    for name in names:
        value = arguments.get(name)
        if type(value) is not str:
            return None
        valid[name] = value
    return valid
