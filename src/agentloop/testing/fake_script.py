"""Fake-server scripts as data: the JSON and TOML files ``agentloop fake-server --script`` plays.

A script is a table (a JSON object, or a TOML document) with these keys, all optional::

    model   = "fake-model"          # the name replies echo (and /v1/models lists, alone)
    models  = ["fake-model", "b"]   # served models: any other is a 404 model_not_found
    default = { text = "ok" }       # answers once the steps run out (else: a 500 saying so)
    steps   = [ ... ]               # one step per request, in order
    rate_limit = { rpm = 600, window = 60 }   # a 429 with Retry-After above rpm per window
    batch   = { complete_after = 2.0 }         # seconds before a batch (SPEC 25) completes

A JSON file may also be a bare list of steps. A step is a table:

- a reply: ``text``, ``tool_calls`` (a list of ``{name, arguments, id}``; ``arguments`` is a
  table, or a string sent verbatim), ``finish_reason``, ``input_tokens``, ``output_tokens``,
  ``chunk_delay``, ``thinking`` and ``thinking_signature`` (reasoning), ``refusal``,
  ``web_search`` (a list of queries the provider searched itself: server-tool blocks, SPEC 24;
  with ``finish_reason = "pause_turn"`` an Anthropic reply is a paused turn), ``tool_search``
  (``{query, found}``: a native tool search on Anthropic naming the tools found, SPEC 22);
- a fault: ``fault`` = one of ``FAULTS`` with that fault's own keys (``status``, ``body`` and
  ``headers`` for ``status``; ``retry_after``; ``seconds`` for ``hang``; ``location``; the reply
  keys for ``truncate``); ``status = N`` without ``fault`` is shorthand for ``fault = "status"``.

Any step takes ``delay`` (seconds before it answers), ``repeat`` (play it N times) and
``batch_result`` (how a batch API answers it: ``succeeded``, ``errored``, ``expired`` or
``canceled``). Parsing is
pure and strict: an unknown key, fault or type is a ``ConfigurationError`` naming the step and
the key, so a typo in a script fails at load time, not as a puzzling test.
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from agentloop._util.numbers import is_finite
from agentloop._util.slots import record
from agentloop.errors import ConfigurationError
from agentloop.testing.fake_steps import FakeReply, FakeToolCall, Fault

__all__ = ["FAULTS", "FakeScript", "load_fake_script"]

_REPLY_KEYS = frozenset(
    {
        "text",
        "tool_calls",
        "finish_reason",
        "input_tokens",
        "output_tokens",
        "chunk_delay",
        "thinking",
        "thinking_signature",
        "refusal",
        "web_search",
        "tool_search",
    }
)
_OPTIONAL_TEXTS = ("finish_reason", "thinking", "thinking_signature", "refusal")
_TOP_KEYS = frozenset({"model", "models", "default", "steps", "rate_limit", "batch"})
BATCH_RESULTS = ("succeeded", "errored", "expired", "canceled")
"""What a batch API may answer for one request (a step's ``batch_result``)."""

FAULTS: Mapping[str, tuple[Callable[..., Fault], frozenset[str]]] = {
    "status": (Fault.http, frozenset({"status", "body", "headers"})),
    "rate_limit": (Fault.rate_limit, frozenset({"retry_after"})),
    "auth": (Fault.auth, frozenset()),
    "insufficient_credits": (Fault.insufficient_credits, frozenset()),
    "quota": (Fault.quota, frozenset()),
    "context_overflow": (Fault.context_overflow, frozenset()),
    "server_error": (Fault.server_error, frozenset({"status"})),
    "redirect": (Fault.redirect, frozenset({"location", "status"})),
    "reset": (Fault.reset, frozenset()),
    "hang": (Fault.hang, frozenset({"seconds"})),
    "truncate": (Fault.truncate, _REPLY_KEYS),
    "malformed": (Fault.malformed, frozenset()),
}
"""Every fault a script may name, with the keys it takes."""


@record
class FakeScript:
    """A parsed script: what ``FakeProviderServer`` needs to play it."""

    steps: tuple[FakeReply | Fault, ...] = ()
    default: FakeReply | Fault | None = None
    model: str = "fake-model"
    models: tuple[str, ...] | None = None
    rate_limit: tuple[int, float] | None = None
    """``(rpm, window)``: requests above ``rpm`` per ``window`` seconds get a 429."""
    batch_after: float = 0.0
    """Seconds a batch takes to complete (``batch = {complete_after = SECONDS}``)."""


def load_fake_script(
    source: str | os.PathLike[str] | Mapping[str, Any] | Sequence[Any],
) -> FakeScript:
    """Parse a script file (``.toml`` is TOML, anything else JSON) or already-loaded data.

    Raises:
        ConfigurationError: The file cannot be read or parsed, or a step is not understood.
    """
    if not isinstance(source, str | os.PathLike):
        return _script(source)
    path = Path(source)
    try:
        text = path.read_text(encoding="utf-8")
        data = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    except RecursionError as exc:  # json and tomllib recurse once per level of nesting
        raise ConfigurationError(f"fake-server script {str(path)!r}: nested too deeply") from exc
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ConfigurationError(f"fake-server script {str(path)!r}: {exc}") from exc
    return _script(data)


def _script(data: object) -> FakeScript:
    if isinstance(data, list | tuple):
        data = {"steps": data}
    table = _table(data, "the script")
    _only(table, _TOP_KEYS, "the script")
    steps: list[FakeReply | Fault] = []
    for index, raw in enumerate(_list(table.get("steps", []), "steps")):
        step, repeat = _step(raw, f"steps[{index}]")
        steps += [step] * repeat
    default = None
    if "default" in table:
        default, _ = _step(table["default"], "default")
    models = table.get("models")
    if models is not None:
        models = tuple(
            _text(name, f"models[{i}]") for i, name in enumerate(_list(models, "models"))
        )
    model = _text(table.get("model", models[0] if models else "fake-model"), "model")
    limit = _rate_limit(table["rate_limit"]) if "rate_limit" in table else None
    after = 0.0
    if "batch" in table:
        batch = _table(table["batch"], "batch")
        _only(batch, frozenset({"complete_after"}), "batch")
        after = _seconds(batch.get("complete_after", 0.0), "batch.complete_after")
    return FakeScript(tuple(steps), default, model, models, limit, after)


def _rate_limit(data: object) -> tuple[int, float]:
    table = _table(data, "rate_limit")
    _only(table, frozenset({"rpm", "window"}), "rate_limit")
    rpm: Any = table.get("rpm")
    if not _is_int(rpm) or rpm < 1:
        raise _error("rate_limit", f"rpm must be a positive integer, got {rpm!r}")
    window = _seconds(table.get("window", 60.0), "rate_limit.window")
    if window <= 0:
        raise _error("rate_limit", "window must be > 0 seconds")
    return int(rpm), window


def _step(data: object, where: str) -> tuple[FakeReply | Fault, int]:
    table = dict(_table(data, where))
    repeat = table.pop("repeat", 1)
    if not isinstance(repeat, int) or isinstance(repeat, bool) or repeat < 1:
        raise _error(f"{where}.repeat", f"must be a whole number >= 1, not {repeat!r}")
    delay = _seconds(table.pop("delay", 0.0), f"{where}.delay")
    batch = table.pop("batch_result", None)
    if batch is not None and batch not in BATCH_RESULTS:
        raise _error(f"{where}.batch_result", f"must be one of {BATCH_RESULTS}, not {batch!r}")
    if "fault" not in table and "status" in table:
        table["fault"] = "status"
    if "fault" in table:
        step: FakeReply | Fault = _fault(table, where)
    else:
        step = _reply(table, where)
    step = replace(step, delay=delay)
    return (step if batch is None else replace(step, batch_result=batch)), repeat


def _fault(table: dict[str, Any], where: str) -> Fault:
    name = table.pop("fault")
    if name not in FAULTS:
        known = ", ".join(FAULTS)
        raise _error(f"{where}.fault", f"unknown fault {name!r} (known: {known})")
    build, keys = FAULTS[name]
    _only(table, keys, f"{where} (fault {name!r})")
    if name == "truncate":
        return Fault.truncate(_reply(table, where) if table else None)
    for key in ("seconds", "retry_after"):
        if key in table:
            table[key] = _seconds(table[key], f"{where}.{key}")
    if "status" in table and not _is_int(table["status"]):
        raise _error(f"{where}.status", f"must be an HTTP status code, not {table['status']!r}")
    if name == "status" and "status" not in table:
        raise _error(f"{where}.status", "a status fault needs a status code")
    headers = _table(table.get("headers", {}), f"{where}.headers")
    if not all(isinstance(value, str) for value in headers.values()):
        raise _error(f"{where}.headers", "header values must be strings")
    try:
        return build(**table)
    except ConfigurationError as exc:  # Fault's own check: a status or header no server sends
        raise _error(f"{where}.{exc.field}", exc.message.split(": ", 1)[-1]) from exc


def _reply(table: Mapping[str, Any], where: str) -> FakeReply:
    _only(table, _REPLY_KEYS, f"{where} (a reply)")
    calls = [
        _tool_call(call, f"{where}.tool_calls[{i}]")
        for i, call in enumerate(_list(table.get("tool_calls", []), f"{where}.tool_calls"))
    ]
    for key in ("input_tokens", "output_tokens"):
        if key in table and not _is_int(table[key]):
            raise _error(f"{where}.{key}", f"must be a whole number, not {table[key]!r}")
    texts: dict[str, Any] = {
        key: _text(table[key], f"{where}.{key}")
        for key in _OPTIONAL_TEXTS
        if table.get(key) is not None
    }
    searches = _list(table.get("web_search", []), f"{where}.web_search")
    if "tool_search" in table:
        texts["tool_search"] = _tool_search(table["tool_search"], f"{where}.tool_search")
    return FakeReply(
        text=_text(table.get("text", ""), f"{where}.text"),
        tool_calls=tuple(calls),
        web_search=tuple(_text(q, f"{where}.web_search[{i}]") for i, q in enumerate(searches)),
        input_tokens=table.get("input_tokens", 10),
        output_tokens=table.get("output_tokens", 5),
        chunk_delay=_seconds(table.get("chunk_delay", 0.0), f"{where}.chunk_delay"),
        **texts,
    )


def _tool_search(data: object, where: str) -> dict[str, Any]:
    """``{query, found}``: a native search the provider ran (SPEC 22)."""
    table = _table(data, where)
    _only(table, frozenset({"query", "found"}), where)
    found = _list(table.get("found", []), f"{where}.found")
    return {
        "query": _text(table.get("query", ""), f"{where}.query"),
        "found": [_text(n, f"{where}.found[{i}]") for i, n in enumerate(found)],
    }


def _tool_call(data: object, where: str) -> FakeToolCall:
    table = _table(data, where)
    _only(table, frozenset({"name", "arguments", "id"}), where)
    if "name" not in table:
        raise _error(f"{where}.name", "a tool call needs a name")
    arguments = table.get("arguments", {})
    if not isinstance(arguments, Mapping | str):
        raise _error(f"{where}.arguments", "must be a table or a string (sent verbatim)")
    if isinstance(arguments, Mapping):
        try:  # what the server sends, checked now: not as a traceback mid-request
            json.dumps(dict(arguments))
        except (RecursionError, TypeError, ValueError) as exc:
            raise _error(f"{where}.arguments", f"cannot be sent as JSON: {exc}") from exc
    call_id = table.get("id")
    return FakeToolCall(
        _text(table["name"], f"{where}.name"),
        arguments,
        None if call_id is None else _text(call_id, f"{where}.id"),
    )


def _error(where: str, problem: str) -> ConfigurationError:
    return ConfigurationError(f"fake-server script: {where}: {problem}", field=where)


def _only(table: Mapping[str, Any], allowed: frozenset[str], where: str) -> None:
    unknown = sorted(set(table) - allowed)
    if unknown:
        takes = ", ".join(sorted(allowed)) or "no keys"
        raise _error(where, f"unknown key(s) {', '.join(unknown)} (it takes: {takes})")


def _table(data: object, where: str) -> Mapping[str, Any]:
    if not isinstance(data, Mapping):
        raise _error(where, f"must be a table (JSON object), not {type(data).__name__}")
    return data


def _list(data: object, where: str) -> list[Any]:
    if not isinstance(data, list | tuple):
        raise _error(where, f"must be a list, not {type(data).__name__}")
    return list(data)


def _text(data: object, where: str) -> str:
    if not isinstance(data, str):
        raise _error(where, f"must be a string, not {type(data).__name__}")
    return data


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _seconds(value: object, where: str) -> float:
    if not is_finite(value) or value < 0:
        raise _error(where, f"must be a number of seconds >= 0, not {value!r}")
    return float(value)
