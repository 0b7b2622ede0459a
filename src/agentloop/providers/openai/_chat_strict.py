"""Strict structured output for OpenAI: a JSON schema rewritten as strict mode requires it.

OpenAI's strict mode (``strict: true`` on a function tool or a ``json_schema`` response format)
makes the reply follow the schema token by token, but takes only a subset of JSON Schema
(provider-rules.md, OpenAI 5). ``make_strict`` rewrites a copy of a schema into that subset, or
says why it cannot; the original is never changed:

- every object lists every property in ``required`` and gets ``additionalProperties: false``;
  a property that was optional becomes nullable (``"type": ["integer", "null"]``, or an
  ``anyOf`` with ``{"type": "null"}``) unless it already accepts null, and its ``default`` moves
  into its description (``(default: 5)``), since strict mode has no ``default``;
- ``oneOf`` becomes ``anyOf``, a one-member ``allOf`` is unwrapped, a ``$ref`` with sibling
  keywords is inlined (strict mode takes a bare ``$ref`` only);
- keywords strict mode does not take and that only narrow a value (``minLength``,
  ``maxLength``, ``uniqueItems``, a ``format`` outside OpenAI's list, annotations such as
  ``examples``) are dropped: our own validation of the arguments still enforces them, and a
  violation is the usual soft "Invalid arguments" the model reads.

A schema that strict mode cannot express is sent unchanged with ``strict: false`` and
``StrictSchema.reason`` says why. The reasons: an object with free keys (``additionalProperties``
true or a schema, i.e. ``dict[str, X]``; ``patternProperties``; an object that declares no
``properties``), a value of any type (no ``type``, ``{}``), an array without ``items`` or a tuple
(``prefixItems``), ``allOf`` with several members, ``not``, ``if``/``then``/``else``,
``dependentRequired``/``dependentSchemas``, ``unevaluatedProperties``, a ``$ref`` that is not
local (``#``, ``#/$defs/...``, ``#/definitions/...``) or names nothing, a root that is not an
object, and objects nested more than 10 deep.

Optional properties come back: a model in strict mode sends ``null`` for an optional property it
means to leave out, and ``_chat_restore`` drops each ``null`` the rewrite made possible,
so the property's default applies as if strict mode were off (only for schemas where the
rewrite added a null, ``StrictSchema.fills``).

``strict_schema`` caches the rewrite per schema object (the same ``ToolSpec.parameters`` dict is
offered on every turn), so a turn pays a dictionary lookup per tool, not a walk.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import field
from typing import Any

from agentloop._util.slots import record

__all__ = ["StrictSchema", "Rewriter", "make_strict", "strict_schema"]

_KEEP = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "anyOf",
        "enum",
        "const",
        "$ref",
        "$defs",
        "definitions",
        "description",
        "title",
        "pattern",
        "format",
        "multipleOf",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "minItems",
        "maxItems",
    }
)
"""The keywords strict mode takes (OpenAI's "supported schemas"); any other is dropped."""

_IMPOSSIBLE = (
    "patternProperties",
    "prefixItems",
    "not",
    "if",
    "then",
    "else",
    "dependentRequired",
    "dependentSchemas",
    "unevaluatedProperties",
    "additionalItems",
    "unevaluatedItems",
    "$dynamicRef",
    "$recursiveRef",
)
"""Keywords whose meaning strict mode cannot express and that cannot be dropped safely."""

_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
)
_MAX_OBJECT_DEPTH = 10
_CACHE_LIMIT = 512
_NULL: Mapping[str, Any] = {"type": "null"}


@record
class StrictSchema:
    """A schema as sent: rewritten for strict mode, or the original with the reason it is not.

    Attributes:
        schema: What goes on the wire.
        strict: Whether it is sent ``strict: true``.
        reason: Why it is not strict (None when it is).
        fills: The rewrite made optional properties nullable: replies are restored
            (``_chat_restore``).
        original: The schema as given.
    """

    schema: Mapping[str, Any]
    strict: bool
    reason: str | None
    fills: bool
    original: Mapping[str, Any]
    rewriter: Rewriter | None = field(default=None, repr=False, compare=False)
    """The rewrite that added nulls (its definitions and null test restore replies); None
    when it added none."""


class _NotStrict(Exception):
    """Internal: the schema cannot be made strict (the message says why)."""


def make_strict(schema: Mapping[str, Any]) -> StrictSchema:
    """Rewrite ``schema`` for strict mode, or return it unchanged with the reason it cannot be."""
    rewriter = Rewriter(schema)
    try:
        rewritten = rewriter.root()
    except _NotStrict as exc:
        return StrictSchema(schema, False, str(exc), False, schema)
    except RecursionError:  # a schema nested past the interpreter's stack: far past 10 levels
        return StrictSchema(schema, False, "nested too deeply", False, schema)
    return StrictSchema(
        rewritten, True, None, rewriter.fills, schema, rewriter if rewriter.fills else None
    )


_cache: dict[int, tuple[Mapping[str, Any], StrictSchema]] = {}


def strict_schema(schema: Mapping[str, Any]) -> StrictSchema:
    """``make_strict(schema)``, computed once per schema object.

    The entry holds the schema itself, so its id cannot be reused while cached; the cache is
    emptied when it reaches 512 schemas (a program that makes schemas on the fly pays the walk
    again, nothing more).
    """
    entry = _cache.get(id(schema))
    if entry is not None and entry[0] is schema:
        return entry[1]
    result = make_strict(schema)
    if len(_cache) >= _CACHE_LIMIT:
        _cache.clear()
    _cache[id(schema)] = (schema, result)
    return result


class Rewriter:
    """One rewrite: the root's definitions, the ``$ref``s being inlined, whether nulls came in."""

    def __init__(self, schema: Mapping[str, Any]) -> None:
        self.source = schema
        self.defs: dict[str, Mapping[str, Any]] = {}
        for key in ("$defs", "definitions"):
            defs = schema.get(key)
            if isinstance(defs, Mapping):
                self.defs.update({f"#/{key}/{name}": d for name, d in defs.items()})
        self.inlining: set[str] = set()
        self.fills = False

    def root(self) -> dict[str, Any]:
        out = self.node(self.source, 0, "#")
        if "object" not in _types(out):
            raise _NotStrict("# (the root) is not an object")
        for key in ("$defs", "definitions"):
            defs = self.source.get(key)
            if isinstance(defs, Mapping):
                out[key] = {name: self.node(d, 0, f"#/{key}/{name}") for name, d in defs.items()}
        return out

    def node(self, value: object, depth: int, where: str) -> dict[str, Any]:
        """One (sub)schema rewritten; ``depth`` counts the objects around it."""
        if not isinstance(value, Mapping):
            raise _NotStrict(f"{where} is a boolean schema")
        node = self.unwrap(value, where)
        for key in _IMPOSSIBLE:
            if key in node:
                raise _NotStrict(f"{where} uses {key!r}")
        out = {k: v for k, v in node.items() if k in _KEEP and k not in ("$defs", "definitions")}
        _note_default(out, node)
        if out.get("format") not in _FORMATS:
            out.pop("format", None)
        if "$ref" in out:
            return self.ref(out, where)
        if "anyOf" in out:
            return self.union(out, depth, where)
        return self.typed(out, node, depth, where)

    def union(self, out: dict[str, Any], depth: int, where: str) -> dict[str, Any]:
        branches = out["anyOf"]
        if not isinstance(branches, list) or not branches:
            raise _NotStrict(f"{where} has an empty anyOf")
        out["anyOf"] = [self.node(b, depth, f"{where}/anyOf/{i}") for i, b in enumerate(branches)]
        return out

    def typed(
        self, out: dict[str, Any], node: Mapping[str, Any], depth: int, where: str
    ) -> dict[str, Any]:
        kinds = _types(out) or ({"object"} if "properties" in node else set())
        if not kinds and "enum" not in out and "const" not in out:
            raise _NotStrict(f"{where} accepts a value of any type")
        if "object" in kinds:
            self.fields(out, node, depth + 1, where)
        if "array" in kinds:
            if "items" not in node:
                raise _NotStrict(f"{where} is an array without 'items'")
            out["items"] = self.node(node["items"], depth, f"{where}/items")
        return out

    def unwrap(self, node: Mapping[str, Any], where: str) -> Mapping[str, Any]:
        """``oneOf`` as ``anyOf``; one ``allOf`` member merged; ``$ref`` with siblings inlined."""
        if "oneOf" in node:
            node = {**{k: v for k, v in node.items() if k != "oneOf"}, "anyOf": node["oneOf"]}
        all_of = node.get("allOf")
        if all_of is not None:
            if not isinstance(all_of, list) or len(all_of) != 1:
                raise _NotStrict(f"{where} uses 'allOf' with several members")
            rest = {k: v for k, v in node.items() if k != "allOf"}
            return self.unwrap({**_as_mapping(all_of[0], where), **rest}, where)
        ref = node.get("$ref")
        siblings = [k for k in node if k != "$ref" and k in _KEEP]
        if isinstance(ref, str) and siblings and ref in self.defs and ref not in self.inlining:
            self.inlining.add(ref)
            try:
                rest = {k: v for k, v in node.items() if k != "$ref"}
                return self.unwrap({**self.defs[ref], **rest}, where)
            finally:
                self.inlining.discard(ref)
        return node

    def ref(self, out: dict[str, Any], where: str) -> dict[str, Any]:
        ref = out["$ref"]
        if not isinstance(ref, str) or (ref != "#" and ref not in self.defs):
            raise _NotStrict(f"{where} has a $ref strict mode cannot follow")
        return {"$ref": ref}  # a $ref inlined above had siblings; here they can only repeat it

    def fields(self, out: dict[str, Any], node: Mapping[str, Any], depth: int, where: str) -> None:
        if depth > _MAX_OBJECT_DEPTH:
            raise _NotStrict(f"{where} nests objects more than {_MAX_OBJECT_DEPTH} deep")
        extra = node.get("additionalProperties")
        properties = node.get("properties")
        if extra not in (None, False):
            raise _NotStrict(f"{where} allows additional properties")
        if not isinstance(properties, Mapping):
            if properties is None and extra is False:
                properties = {}
            else:
                raise _NotStrict(f"{where} is an object that declares no properties")
        required = node.get("required")
        was_required = set(required) if isinstance(required, list) else set()
        rewritten: dict[str, Any] = {}
        for name, prop in properties.items():
            sub = self.node(prop, depth, f"{where}/properties/{name}")
            if name not in was_required and not self.accepts_null(prop):
                sub = _nullable(sub)
                self.fills = True
            rewritten[name] = sub
        out["properties"] = rewritten
        out["required"] = list(rewritten)
        out["additionalProperties"] = False

    def accepts_null(self, node: object, hops: int = 0) -> bool:
        """Whether ``node`` (original form) already takes ``null``."""
        if not isinstance(node, Mapping) or hops > 8:
            return node is True
        kinds = node.get("type")
        if kinds == "null" or (isinstance(kinds, list) and "null" in kinds):
            return True
        enum = node.get("enum")
        if (isinstance(enum, list) and None in enum) or ("const" in node and node["const"] is None):
            return True
        for key in ("anyOf", "oneOf", "allOf"):
            branches = node.get(key)
            if isinstance(branches, list) and key != "allOf":
                if any(self.accepts_null(b, hops + 1) for b in branches):
                    return True
            elif isinstance(branches, list) and len(branches) == 1:
                return self.accepts_null(branches[0], hops + 1)
        ref = node.get("$ref")
        return isinstance(ref, str) and self.accepts_null(self.defs.get(ref), hops + 1)


def _as_mapping(value: object, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _NotStrict(f"{where} is a boolean schema")
    return value


def _types(node: Mapping[str, Any]) -> set[str]:
    kinds = node.get("type")
    if isinstance(kinds, str):
        return {kinds}
    return {k for k in kinds if isinstance(k, str)} if isinstance(kinds, list) else set()


def _note_default(out: dict[str, Any], node: Mapping[str, Any]) -> None:
    """Keep a non-null ``default`` as words in the description (strict mode has no ``default``)."""
    default = node.get("default")
    if default is None:
        return
    try:
        shown = json.dumps(default, ensure_ascii=False)
    except (TypeError, ValueError):
        return
    if len(shown) > 80:
        return
    description = out.get("description")
    prefix = f"{description} " if isinstance(description, str) and description else ""
    out["description"] = f"{prefix}(default: {shown})"


def _nullable(sub: dict[str, Any]) -> dict[str, Any]:
    """``sub`` (already rewritten) made to accept null as well.

    A scalar type gains ``"null"`` in its ``type`` list (the form OpenAI documents); an object,
    an array, an enum or a ``$ref`` is wrapped in ``anyOf`` with ``{"type": "null"}``.
    """
    kinds = sub.get("type")
    plain = "enum" not in sub and "const" not in sub and not _types(sub) & {"object", "array"}
    if isinstance(kinds, str) and plain:
        return {**sub, "type": [kinds, "null"]}
    if isinstance(kinds, list) and plain:
        return {**sub, "type": [*kinds, "null"]}
    if "anyOf" in sub:
        return {**sub, "anyOf": [*sub["anyOf"], dict(_NULL)]}
    outer: dict[str, Any] = {k: sub[k] for k in ("description", "title") if k in sub}
    inner = {k: v for k, v in sub.items() if k not in outer}
    return {"anyOf": [inner, dict(_NULL)], **outer}
