"""A cassette's file and its requests as stored: redaction, media digests, the first difference.

Pure: no sockets, no event loop. A request is stored (and matched) as ``{method, path, body}``
where ``body`` is the parsed JSON (a non-JSON body as text, JSON Lines as a list), every string
passed through the package's one redactor (``safety.redact``) with the client's key and the
cassette's own ``redact`` strings, ``<redacted>`` for each, run and session ids (and the
fields derived from them) as ``<run-id>``, the ids ``remember`` derives from a run's id
(``m`` and 16 hex digits, SPEC 27) as ``<memory-id>``, and every base64 string over 1 KiB
of decoded bytes replaced by ``<media sha256:HEX BYTES>`` (a data URL keeps its ``data:...,``
head), so a 1 MiB image costs a line and two requests carrying the same image match.
Responses are kept as they came (a heuristic redaction would change what the model said): only
the exact known secrets are replaced in them.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from agentloop.errors import ConfigurationError
from agentloop.safety.redact import REDACTED, redact_secrets

__all__ = [
    "FORMAT_VERSION",
    "MEDIA_THRESHOLD",
    "MEMORY_ID_MARK",
    "REDACTED_MARK",
    "RUN_ID_MARK",
    "first_difference",
    "kept_headers",
    "load",
    "parse_body",
    "request_record",
    "run_ids",
    "save",
    "scrub_known",
]

FORMAT_VERSION = 1
MEDIA_THRESHOLD = 1024
"""Decoded bytes above which a base64 string in a request is stored by digest."""
REDACTED_MARK = "<redacted>"
_SECRET_QUERY = frozenset({"key", "api_key", "api-key", "token", "access_token", "sig"})
_BASE64 = re.compile(r"[A-Za-z0-9+/_-]+={0,2}")
_DATA_URL = re.compile(r"(data:[^,;]*(?:;[^,;]*)*;base64,)(.*)", re.DOTALL)
_MIN_ENCODED = MEDIA_THRESHOLD * 4 // 3


def scrub_known(text: str, secrets: Iterable[str]) -> str:
    """Replace each exact secret (4 characters or more) with ``<redacted>``."""
    for secret in secrets:
        if len(secret) >= 4:
            text = text.replace(secret, REDACTED_MARK)
    return text


_NOISE = frozenset(
    {"set-cookie", "date", "server", "content-length", "connection", "keep-alive",
     "transfer-encoding"}
)  # fmt: skip


def kept_headers(headers: Mapping[str, str], secrets: Iterable[str]) -> dict[str, str]:
    """The response headers worth keeping (no cookie, no per-exchange noise), secrets redacted."""
    return {k: scrub_known(v, secrets) for k, v in headers.items() if k not in _NOISE}


def _scrub(text: str, secrets: tuple[str, ...]) -> str:
    text = redact_secrets(scrub_known(text, secrets), secrets).replace(REDACTED, REDACTED_MARK)
    if len(text) >= 32:
        text = _RUN_ID.sub(RUN_ID_MARK, text)
    return _MEMORY_ID.sub(MEMORY_ID_MARK, text) if len(text) >= 17 else text


def _media(text: str) -> str | None:
    """``<media sha256:HEX BYTES>`` for a long base64 string (or data URL), else None."""
    if len(text) < _MIN_ENCODED:
        return None
    head, body = "", text
    found = _DATA_URL.fullmatch(text)
    if found is not None:
        head, body = found.group(1), found.group(2)
    if _BASE64.fullmatch(body) is None:
        return None
    try:
        raw = base64.b64decode(body, altchars=b"-_" if "-" in body or "_" in body else None)
    except (binascii.Error, ValueError):
        return None
    if len(raw) <= MEDIA_THRESHOLD:
        return None
    return f"{head}<media sha256:{hashlib.sha256(raw).hexdigest()} {len(raw)}>"


RUN_ID_MARK = "<run-id>"
_PER_RUN_KEYS = frozenset({"prompt_cache_key"})
"""Request fields derived from a run's or session's fresh id: stored and matched as ``<run-id>``."""
_RUN_ID = re.compile(r"(?<![0-9A-Za-z])[0-9a-f]{12}4[0-9a-f]{3}[89ab][0-9a-f]{15}(?![0-9A-Za-z])")
"""A run or session id as ``Clock.new_id`` makes them: a version-4 UUID's 32 hex digits.

``_`` may touch it: a batch request's ``custom_id`` is ``<run id>_<turn>_<attempt>`` (SPEC 25).
"""


MEMORY_ID_MARK = "<memory-id>"
_MEMORY_ID = re.compile(r"(?<![0-9A-Za-z])m[0-9a-f]{16}(?![0-9A-Za-z])")
"""A memory item's id as ``remember`` makes it from the run's id and the call's: fresh per run."""


def run_ids(text: str) -> list[str]:
    """The run and session ids in ``text``, in order."""
    return _RUN_ID.findall(text)


def _clean(value: Any, secrets: tuple[str, ...]) -> Any:
    if isinstance(value, str):
        return _media(value) or _scrub(value, secrets)
    if isinstance(value, Mapping):
        return {
            str(k): RUN_ID_MARK if k in _PER_RUN_KEYS else _clean(v, secrets)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [_clean(v, secrets) for v in value]
    return value


def parse_body(payload: Mapping[str, Any] | bytes | None) -> Any:
    """A body as stored: parsed JSON, JSON Lines as a list, else text (a mapping as it is)."""
    if not isinstance(payload, bytes):
        return payload
    text = payload.decode("utf-8", errors="replace")
    try:
        return json.loads(text)
    except ValueError:
        pass
    lines = [line for line in text.splitlines() if line.strip()]
    try:
        return [json.loads(line) for line in lines] if len(lines) > 1 else text
    except ValueError:
        return text


def _path(url: str, secrets: tuple[str, ...]) -> str:
    parts = urlsplit(url)
    if not parts.query:
        return _RUN_ID.sub(RUN_ID_MARK, parts.path)
    pairs = [
        (k, REDACTED_MARK if k.lower() in _SECRET_QUERY else _scrub(v, secrets))
        for k, v in parse_qsl(parts.query, keep_blank_values=True)
    ]
    return f"{_RUN_ID.sub(RUN_ID_MARK, parts.path)}?{urlencode(pairs, safe='<>')}"


def request_record(
    method: str, url: str, payload: Mapping[str, Any] | bytes | None, secrets: tuple[str, ...]
) -> dict[str, Any]:
    """The request as stored and matched: no header, secrets redacted, media by digest."""
    return {
        "method": method,
        "path": _path(url, secrets),
        "body": _clean(parse_body(payload), secrets),
    }


def first_difference(recorded: Any, got: Any, where: str = "$") -> tuple[str, Any, Any] | None:
    """The JSON path of the first difference and the two values there, or None if equal."""
    if isinstance(recorded, dict) and isinstance(got, dict):
        for key in sorted(set(recorded) | set(got), key=str):
            found = first_difference(recorded.get(key), got.get(key), f"{where}.{key}")
            if found is not None:
                return found
        return None
    if isinstance(recorded, list) and isinstance(got, list):
        for index, (left, right) in enumerate(zip(recorded, got, strict=False)):
            found = first_difference(left, right, f"{where}[{index}]")
            if found is not None:
                return found
        if len(recorded) != len(got):
            shorter = min(len(recorded), len(got))
            left = recorded[shorter] if shorter < len(recorded) else None
            right = got[shorter] if shorter < len(got) else None
            return f"{where}[{shorter}]", left, right
        return None
    return None if recorded == got and type(recorded) is type(got) else (where, recorded, got)


def load(path: Path) -> list[dict[str, Any]]:
    """The interactions of a cassette file (YAML or JSON by its suffix)."""
    text = path.read_text(encoding="utf-8")
    try:
        data = _parse(text, path)
    except ValueError as exc:
        raise ConfigurationError(f"cassette {path} does not parse: {exc}") from exc
    if not isinstance(data, dict) or data.get("agentloop_cassette") != FORMAT_VERSION:
        raise ConfigurationError(
            f"cassette {path} is not an agentloop cassette (agentloop_cassette: 1 expected)"
        )
    interactions = data.get("interactions")
    if not isinstance(interactions, list) or not all(isinstance(i, dict) for i in interactions):
        raise ConfigurationError(f"cassette {path}: 'interactions' must be a list of mappings")
    return interactions


def _yaml() -> Any:
    from agentloop._util.extras import require_extra

    require_extra("evals", ("yaml",), "a YAML cassette")
    import yaml

    return yaml


def _parse(text: str, path: Path) -> Any:
    if path.suffix.lower() == ".json":
        return json.loads(text)
    yaml = _yaml()

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ValueError(str(exc)) from exc


def save(path: Path, interactions: list[dict[str, Any]]) -> None:
    """Write the cassette, keys sorted (YAML unless the suffix is ``.json``)."""
    data = {"agentloop_cassette": FORMAT_VERSION, "interactions": interactions}
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix.lower() == ".json":
        text = json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    else:
        text = _yaml().safe_dump(data, sort_keys=True, allow_unicode=True, width=1 << 20)
    path.write_text(text, encoding="utf-8")
