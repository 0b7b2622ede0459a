"""What each model family accepts: one table every adapter consults (SPEC 16, model profiles).

A setting a model refuses is a ``ConfigurationError`` naming the setting and the model, raised
before that request is sent: never a provider 400, never retried, never a reason to fall back.
The table absorbs what used to be per-client switches (the ``max_tokens`` wire name, a fixed
output limit for every Claude, ``strict: false`` for every schema). Rows are matched in order;
the first pattern that matches the model name (lower-cased, any ``provider/`` prefix such as
OpenRouter's ``openai/`` dropped) wins, and every provider ends with a catch-all row.

Sources: ``shared/spec/provider-rules.md`` (each rule there cites the provider's own docs).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import field
from typing import Any

from agentloop._util.slots import record
from agentloop.errors import ConfigurationError
from agentloop.model import ModelSettings

__all__ = [
    "ANTHROPIC_EFFORT_BUDGETS",
    "ModelProfile",
    "check_settings",
    "merge_body",
    "profile_for",
]


@record
class ModelProfile:
    """What one model family accepts.

    Attributes:
        family: A readable name for messages (``"OpenAI reasoning (o-series, gpt-5)"``).
        max_output_tokens: The output limit sent when ``ModelSettings.max_tokens`` is unset
            (Anthropic requires one); None sends none.
        max_tokens_field: The wire name of the output limit on OpenAI Chat Completions.
        sampling: Accepts ``temperature`` (other than 1) and ``top_p``.
        stop: Accepts ``stop`` sequences.
        temperature_with_top_p: Accepts ``temperature`` and ``top_p`` in one request.
        efforts: The ``reasoning_effort`` values it takes (empty: none).
        thinking_budget: Takes ``thinking_budget``.
        chat_completions: Served on ``/v1/chat/completions`` (False: Responses API only).
        strict_schema: Structured output and tools may be sent ``strict`` where the schema allows.
        thinks_by_default: Reasons without being asked (its reasoning comes back).
        media: The media kinds it takes in a prompt (``"image"``, ``"document"``, ``"audio"``).
        append_only: Binds each thinking block to everything before it (SPEC 28): ``system``,
            ``tools`` and earlier messages must go back byte for byte.
        adaptive_thinking: Takes ``thinking: {"type": "adaptive"}`` with
            ``output_config.effort`` and refuses ``{"type": "enabled"}`` (Claude 4.7 and later).
        mid_conversation_system: Takes ``{"role": "system"}`` messages inside ``messages``.
        mid_conversation_tools: Takes tool changes as ``tool_addition``/``tool_removal`` blocks
            of such a message.
        server_compaction: Has the provider's server-side compaction (``compact_20260112``).
    """

    family: str
    max_output_tokens: int | None = None
    max_tokens_field: str = "max_tokens"
    sampling: bool = True
    stop: bool = True
    temperature_with_top_p: bool = True
    efforts: frozenset[str] = field(default_factory=frozenset)
    thinking_budget: bool = False
    chat_completions: bool = True
    strict_schema: bool = True
    thinks_by_default: bool = False
    media: frozenset[str] = frozenset({"image", "document"})
    append_only: bool = False
    adaptive_thinking: bool = False
    mid_conversation_system: bool = False
    mid_conversation_tools: bool = False
    server_compaction: bool = False


_ALL_EFFORTS = frozenset({"none", "minimal", "low", "medium", "high"})
_O_EFFORTS = frozenset({"low", "medium", "high"})

_OPENAI_REASONING = "OpenAI reasoning models (o-series, gpt-5 family)"

_TABLE: dict[str, tuple[tuple[str, ModelProfile], ...]] = {
    "openai": (
        (
            r"(gpt-5(\.\d+)?-pro|o\d+-pro|.*codex.*|o\d+-deep-research.*)",
            ModelProfile(
                "OpenAI Responses-only models (gpt-5-pro, o3-pro, codex)",
                max_tokens_field="max_completion_tokens",
                sampling=False,
                stop=False,
                efforts=_O_EFFORTS,
                chat_completions=False,
                thinks_by_default=True,
            ),
        ),
        (
            r"gpt-5-chat.*",
            ModelProfile("OpenAI gpt-5-chat", max_tokens_field="max_completion_tokens"),
        ),
        (
            r"gpt-5\.\d+.*",
            ModelProfile(
                _OPENAI_REASONING,
                max_tokens_field="max_completion_tokens",
                sampling=False,
                stop=False,
                efforts=frozenset({"none", "low", "medium", "high"}),  # 5.1+: none, no minimal
                thinks_by_default=True,
            ),
        ),
        (
            r"gpt-5.*",
            ModelProfile(
                _OPENAI_REASONING,
                max_tokens_field="max_completion_tokens",
                sampling=False,
                stop=False,
                efforts=frozenset({"minimal", "low", "medium", "high"}),
                thinks_by_default=True,
            ),
        ),
        (  # media: the small early o-series models read no images and no files
            r"o1-mini.*|o1-preview.*|o3-mini.*",
            ModelProfile(
                _OPENAI_REASONING,
                max_tokens_field="max_completion_tokens",
                sampling=False,
                stop=False,
                efforts=_O_EFFORTS,
                thinks_by_default=True,
                media=frozenset(),
            ),
        ),
        (
            r"o\d.*",
            ModelProfile(
                _OPENAI_REASONING,
                max_tokens_field="max_completion_tokens",
                sampling=False,
                stop=False,
                efforts=_O_EFFORTS,  # the o-series never took "minimal"
                thinks_by_default=True,
            ),
        ),
        (  # input_audio: gpt-audio*, gpt-4o(-mini)-audio-preview* (OpenAI spec); no images
            r"gpt-(4o-(mini-)?)?audio.*",
            ModelProfile("OpenAI audio models", media=frozenset({"audio"})),
        ),
        (
            r"gpt-3\.5.*|gpt-4(-\d{4}(-preview)?|-32k.*|-turbo-preview)?",
            ModelProfile("OpenAI text-only chat models", media=frozenset()),
        ),
        (
            r"gpt-4o.*|chatgpt-4o.*|gpt-4\.\d.*|gpt-4-turbo.*|gpt-4-vision.*",
            ModelProfile("OpenAI GPT-4o / GPT-4.1 / GPT-4 Turbo"),
        ),
        (  # an OpenAI-compatible server's model: images pass (the server knows if it sees);
            # documents and audio need OpenAIClient(media=...): Ollama and llama.cpp take no files
            r".*",
            ModelProfile("OpenAI-compatible chat models", media=frozenset({"image"})),
        ),
    ),
    "anthropic": (
        (
            r"claude-(opus-4|opus-4-0|4-opus).*|claude-opus-4-1.*",
            ModelProfile(
                "Claude Opus 4",
                max_output_tokens=32_000,
                efforts=_ALL_EFFORTS,
                thinking_budget=True,
                temperature_with_top_p=False,
            ),
        ),
        (
            r"claude-(sonnet-4-[5-9]|haiku-4-[5-9]|opus-4-[5-9]|(sonnet|haiku|opus)-[5-9]).*",
            ModelProfile(
                "Claude 4.5 and later",
                max_output_tokens=64_000,
                efforts=_ALL_EFFORTS,
                thinking_budget=True,
                temperature_with_top_p=False,
            ),
        ),
        (
            r"claude-(sonnet-4|4-sonnet|3-7-sonnet).*",
            ModelProfile(
                "Claude Sonnet 4 / 3.7",
                max_output_tokens=64_000,
                efforts=_ALL_EFFORTS,
                thinking_budget=True,
            ),
        ),
        (r"claude-3-5-.*", ModelProfile("Claude 3.5", max_output_tokens=8_192)),
        (  # Claude 3 (Haiku, Sonnet, Opus): images only, no PDFs (they came with 3.5)
            r".*",
            ModelProfile("Claude", max_output_tokens=4_096, media=frozenset({"image"})),
        ),
    ),
    "gemini": (  # Gemini 2.5 and 3 read images, documents and audio; older rows keep the default
        (  # Gemini 3 Pro thinks at LOW or HIGH; 3.1 Pro adds MEDIUM; neither takes MINIMAL
            r"gemini-3-pro.*",
            ModelProfile(
                "Gemini 3 Pro",
                efforts=frozenset({"low", "high"}),
                thinks_by_default=True,
                media=frozenset({"image", "document", "audio"}),
            ),
        ),
        (
            r"gemini-3\.\d+-pro.*",
            ModelProfile(
                "Gemini 3.x Pro",
                efforts=frozenset({"low", "medium", "high"}),
                thinks_by_default=True,
                media=frozenset({"image", "document", "audio"}),
            ),
        ),
        (
            r"gemini-[3-9].*",
            ModelProfile(
                "Gemini 3",
                max_output_tokens=None,
                efforts=frozenset({"minimal", "low", "medium", "high"}),
                thinks_by_default=True,
                media=frozenset({"image", "document", "audio"}),
            ),
        ),
        (
            r"gemini-2\.5.*",
            ModelProfile(
                "Gemini 2.5",
                thinking_budget=True,
                thinks_by_default=True,
                media=frozenset({"image", "document", "audio"}),
            ),
        ),
        (r".*", ModelProfile("Gemini")),
    ),
}

ANTHROPIC_EFFORT_BUDGETS: Mapping[str, int | None] = {
    "none": None,  # thinking off
    "minimal": 1_024,  # the API's smallest budget
    "low": 4_096,
    "medium": 16_384,
    "high": 32_768,
}
"""Anthropic has budgets, not efforts: ``reasoning_effort`` becomes ``budget_tokens`` here."""

_COMPILED = {
    provider: tuple((re.compile(pattern), profile) for pattern, profile in rows)
    for provider, rows in _TABLE.items()
}


def profile_for(provider: str, model: str) -> ModelProfile:
    """The profile of ``model`` at ``provider`` (OpenAI-compatible providers use OpenAI's rows)."""
    rows = _COMPILED.get(provider) or _COMPILED["openai"]
    name = model.lower().rpartition("/")[2]
    for pattern, profile in rows:
        if pattern.fullmatch(name):
            return profile
    raise AssertionError("every provider's table ends with a catch-all row")  # pragma: no cover


def _refuse(setting: str, model: str, why: str) -> ConfigurationError:
    return ConfigurationError(
        f"{model} does not take ModelSettings.{setting}: {why}", field=setting
    )


def check_settings(profile: ModelProfile, model: str, settings: ModelSettings) -> None:
    """Raise ``ConfigurationError`` for the first setting ``model`` refuses (before sending)."""
    family = profile.family
    if not profile.sampling:
        if settings.temperature is not None and settings.temperature != 1:
            raise _refuse("temperature", model, f"{family} accept only the default (1)")
        if settings.top_p is not None:
            raise _refuse("top_p", model, f"{family} do not take it")
    if settings.stop is not None and not profile.stop:
        raise _refuse("stop", model, f"{family} do not take stop sequences")
    if (
        not profile.temperature_with_top_p
        and settings.temperature is not None
        and settings.top_p is not None
    ):
        raise _refuse("top_p", model, f"{family} take temperature or top_p, not both")
    effort = settings.reasoning_effort
    if effort is not None and effort not in profile.efforts:
        accepted = ", ".join(sorted(profile.efforts)) or "none (not a reasoning model)"
        raise _refuse("reasoning_effort", model, f"{family} take {accepted}")
    if settings.thinking_budget is not None and not profile.thinking_budget:
        why = (
            "use reasoning_effort (Gemini 3 thinks by level)"
            if profile.efforts
            else "it has no thinking budget"
        )
        raise _refuse("thinking_budget", model, why)


def merge_body(payload: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """Merge ``extra`` into ``payload`` key by key, recursively for objects (in place).

    ``extra_body={"generationConfig": {"thinkingConfig": ...}}`` adds to the payload's
    ``generationConfig`` instead of replacing it; a non-object value replaces.
    """
    for key, value in extra.items():
        here = payload.get(key)
        if isinstance(here, dict) and isinstance(value, Mapping):
            payload[key] = merge_body(dict(here), value)
        else:
            payload[key] = value
    return payload
