"""What each model family accepts: one table every adapter consults (SPEC 16, model profiles).

A setting a model refuses is a ``ConfigurationError`` naming the setting and the model, raised
before that request is sent: never a provider 400, never retried, never a reason to fall back.
The table absorbs what used to be per-client switches (the ``max_tokens`` wire name, a fixed
output limit for every Claude, ``strict: false`` for every schema). Rows are matched in order;
the first pattern that matches the model name (lower-cased, any ``provider/`` prefix such as
OpenRouter's ``openai/`` dropped, and a Bedrock ``anthropic.``/``us.anthropic.`` prefix and a
Vertex ``@<date>`` or Bedrock ``-v1:0`` suffix too) wins.

Every provider ends with a catch-all row, and for the providers whose names we know (OpenAI,
Anthropic, Gemini) a name no row knows is taken for a model newer than the table: it gets the
newest family's row (``gpt-7`` the gpt-6 rules, ``claude-fable-6-0`` Fable 5.2's,
``gemini-4-pro`` Gemini 3.8's), never a generic row that would refuse what such a model takes.
Only an OpenAI-compatible server's unknown model (a vLLM, Ollama or OpenRouter name that is not
OpenAI's) gets the generic chat row.

``efforts`` lists the ``reasoning_effort`` values a family takes (``ReasoningEffort``: none,
minimal, low, medium, high, xhigh, max); any other is a ``ConfigurationError`` naming the
setting, the model and what it takes. Claude's ``"none"`` means no thinking is asked for.

Sources: ``shared/spec/provider-rules.md`` (each rule there cites the provider's own page) and
``shared/specs/openai-openapi.yaml``, rule by rule in the comment above ``_TABLE``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import field, replace
from typing import Any

from agentloop._util.slots import record
from agentloop.errors import ConfigurationError
from agentloop.model import REASONING_EFFORTS, ModelSettings

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
        provider_tools: The provider tool kinds it takes (SPEC 24); None: every kind its wire has.
        provider_tools_with_functions: Takes provider tools beside function tools (not Gemini 2.x).
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
    provider_tools: frozenset[str] | None = None
    provider_tools_with_functions: bool = True


_BUDGET_EFFORTS = frozenset({"none", "minimal", "low", "medium", "high"})
"""Claude up to 4.6: ``reasoning_effort`` through ``ANTHROPIC_EFFORT_BUDGETS``."""
_ADAPTIVE_EFFORTS = frozenset({"none", "low", "medium", "high", "xhigh", "max"})
"""Claude 4.7 and later: ``output_config.effort`` (``"none"``: no thinking asked for)."""
_O_EFFORTS = frozenset({"low", "medium", "high"})
_GPT5_EFFORTS = frozenset({"minimal", "low", "medium", "high"})  # before 5.1: no "none"
_GPT51_EFFORTS = frozenset({"none", "low", "medium", "high"})  # 5.1 defaults to "none"
_GPT52_EFFORTS = frozenset({"none", "low", "medium", "high", "xhigh"})  # 5.2+: no "minimal"
_SOL_EFFORTS = _GPT52_EFFORTS | {"max"}  # gpt-5.6-sol only (terra, luna stop at xhigh)
_CODEX_MAX_EFFORTS = frozenset({"low", "medium", "high", "xhigh"})
_GEMINI_LEVELS = frozenset({"low", "medium", "high"})
_GEMINI_MEDIA = frozenset({"image", "document", "audio"})

_OPENAI_REASONING = "OpenAI reasoning models (o-series, gpt-5 family)"
_OPENAI_RESPONSES_ONLY = "OpenAI Responses-only models (pro, codex, deep research)"


def _reasoning(family: str, efforts: frozenset[str], **more: Any) -> ModelProfile:
    """An OpenAI reasoning model: no sampling, no stop, ``max_completion_tokens`` (rule 1, 5)."""
    return ModelProfile(
        family,
        max_tokens_field="max_completion_tokens",
        sampling=False,
        stop=False,
        efforts=efforts,
        thinks_by_default=True,
        **more,
    )


def _claude(
    family: str,
    max_output_tokens: int,
    *,
    adaptive: bool = True,
    append_only: bool = False,
    mid_conversation: bool = False,
    compaction: bool = True,
) -> ModelProfile:
    """A Claude 4.5+ row: thinking by budget (up to 4.6) or adaptive (4.7 and later)."""
    return ModelProfile(
        family,
        max_output_tokens=max_output_tokens,
        efforts=_ADAPTIVE_EFFORTS if adaptive else _BUDGET_EFFORTS,
        thinking_budget=not adaptive,
        temperature_with_top_p=False,
        append_only=append_only,
        adaptive_thinking=adaptive,
        mid_conversation_system=mid_conversation,
        mid_conversation_tools=mid_conversation,
        server_compaction=compaction,
    )


def _gemini3(family: str, efforts: frozenset[str]) -> ModelProfile:
    return ModelProfile(family, efforts=efforts, thinks_by_default=True, media=_GEMINI_MEDIA)


_NEWEST_GPT = _reasoning("OpenAI gpt-6 family (and later names)", _GPT52_EFFORTS)
_NEWEST_CLAUDE = _claude("Claude Fable / Mythos 5.2 (and later names)", 128_000, append_only=True)

# Sources (each rule in shared/spec/provider-rules.md cites the provider's page):
# - OpenAI: efforts from the API reference's ReasoningEffort (shared/specs/openai-openapi.yaml:
#   none|minimal|low|medium|high|xhigh|max, "not all reasoning models support every value"),
#   provider-rules "OpenAI 2026" 2 (5.1 defaults to none; before 5.1 no none; gpt-5-pro only
#   high; xhigh from gpt-5.1-codex-max on, which introduced it; 5.2+ no minimal), 3 (max on
#   gpt-5.6-sol only), 4-5 (gpt-6* reason by default: the reasoning-model rules), OpenAI 2
#   (Responses-only models).
# - Anthropic: provider-rules "Anthropic, late 2026" 1 (append_only: Fable 5.1/5.2, Mythos
#   5.1/5.2, Opus/Sonnet/Haiku 5.5), 6 (mid-conversation system messages: Fable 5/5.1, Mythos
#   5/5.1, Opus 4.8/5/5.5, Sonnet 5.5, Haiku 5.5, not Sonnet 5; tool changes reported on the
#   same models), 7 (adaptive thinking from 4.7, enabled+budget up to 4.6), 8 (compaction
#   beta compact-2026-01-12: Claude 4.6 and later); output limits from the models overview
#   (64k for Sonnet/Haiku, 128k for Opus 4.6+ and the 5.x flagships).
# - Gemini: provider-rules "Gemini 2026" 2 (3.7/3.8 Flash and 3.1 Pro LOW/MEDIUM/HIGH, first
#   Gemini 3 Flash MINIMAL..HIGH, 3 Pro LOW/HIGH), 3 (2.5: budget only), 5 (3.7 routes to 3.8).
_TABLE: dict[str, tuple[tuple[str, ModelProfile], ...]] = {
    "openai": (
        (
            r"gpt-5-pro.*",
            _reasoning(_OPENAI_RESPONSES_ONLY, frozenset({"high"}), chat_completions=False),
        ),
        (  # gpt-5.2-pro and later pro models: medium, high, xhigh (OpenAI model pages)
            r"gpt-5\.\d+-pro.*",
            _reasoning(
                _OPENAI_RESPONSES_ONLY,
                frozenset({"medium", "high", "xhigh"}),
                chat_completions=False,
            ),
        ),
        (
            r"o\d+-pro.*|o\d+-deep-research.*",
            _reasoning(_OPENAI_RESPONSES_ONLY, _O_EFFORTS, chat_completions=False),
        ),
        (  # xhigh came with gpt-5.1-codex-max and is taken by every codex after it
            r"gpt-5\.1-codex-max.*|gpt-5\.([2-9]|\d{2,})-codex.*|gpt-([6-9]|\d{2,}).*codex.*",
            _reasoning(_OPENAI_RESPONSES_ONLY, _CODEX_MAX_EFFORTS, chat_completions=False),
        ),
        (r".*codex.*", _reasoning(_OPENAI_RESPONSES_ONLY, _O_EFFORTS, chat_completions=False)),
        (
            r"gpt-5-chat.*",
            ModelProfile("OpenAI gpt-5-chat", max_tokens_field="max_completion_tokens"),
        ),
        (r"gpt-5\.6-sol.*", _reasoning("OpenAI gpt-5.6-sol", _SOL_EFFORTS)),
        (r"gpt-5\.1(-.*)?", _reasoning("OpenAI gpt-5.1", _GPT51_EFFORTS)),
        (r"gpt-5\.\d+.*", _reasoning("OpenAI gpt-5.2 and later", _GPT52_EFFORTS)),
        (r"gpt-5.*", _reasoning(_OPENAI_REASONING, _GPT5_EFFORTS)),
        (  # sol takes max on gpt-6 too (the sol line's top tier; reported for 5.6, kept for 6)
            r"gpt-([6-9]|\d{2,})(\.\d+)?-sol.*",
            _reasoning("OpenAI gpt-6 sol", _SOL_EFFORTS),
        ),
        (r"gpt-([6-9]|\d{2,}).*", _NEWEST_GPT),
        (  # media: the small early o-series models read no images and no files
            r"o1-mini.*|o1-preview.*|o3-mini.*",
            _reasoning(_OPENAI_REASONING, _O_EFFORTS, media=frozenset()),
        ),
        (r"o\d.*", _reasoning(_OPENAI_REASONING, _O_EFFORTS)),  # the o-series never took minimal
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
            r"claude-(opus-4|opus-4-0|4-opus)(-\d{8})?|claude-opus-4-1.*",
            ModelProfile(
                "Claude Opus 4",
                max_output_tokens=32_000,
                efforts=_BUDGET_EFFORTS,
                thinking_budget=True,
                temperature_with_top_p=False,
            ),
        ),
        (
            r"claude-(sonnet|haiku|opus)-4-5.*",
            _claude("Claude 4.5", 64_000, adaptive=False, compaction=False),
        ),
        (r"claude-opus-4-6.*", _claude("Claude Opus 4.6", 128_000, adaptive=False)),
        (r"claude-sonnet-4-6.*", _claude("Claude Sonnet 4.6", 64_000, adaptive=False)),
        (r"claude-opus-4-7.*", _claude("Claude Opus 4.7", 128_000)),
        (r"claude-opus-4-([89]).*", _claude("Claude Opus 4.8", 128_000, mid_conversation=True)),
        (r"claude-sonnet-4-([7-9]).*", _claude("Claude Sonnet 4.7+", 64_000)),
        (r"claude-haiku-4-([6-9]).*", _claude("Claude Haiku 4.6+", 64_000)),
        (  # Fable and Mythos 5: checked by block, not by prefix; system messages mid-conversation
            r"claude-(fable|mythos)-5(-\d{8})?",
            _claude("Claude Fable / Mythos 5", 128_000, mid_conversation=True),
        ),
        (
            r"claude-(fable|mythos)-5-1.*",
            _claude("Claude Fable / Mythos 5.1", 128_000, append_only=True, mid_conversation=True),
        ),
        (r"claude-(fable|mythos)-5-2.*", _NEWEST_CLAUDE),  # mid-conversation: not documented
        (r"claude-opus-5(-\d{8})?", _claude("Claude Opus 5", 128_000, mid_conversation=True)),
        (r"claude-sonnet-5(-\d{8})?", _claude("Claude Sonnet 5", 64_000)),  # no system messages
        (r"claude-haiku-5(-\d{8})?", _claude("Claude Haiku 5", 64_000)),
        (
            r"claude-opus-5-\d+.*",
            _claude("Claude Opus 5.5", 128_000, append_only=True, mid_conversation=True),
        ),
        (
            r"claude-(sonnet|haiku)-5-\d+.*",
            _claude("Claude Sonnet / Haiku 5.5", 64_000, append_only=True, mid_conversation=True),
        ),
        (
            r"claude-(sonnet-4|4-sonnet|3-7-sonnet).*",
            ModelProfile(
                "Claude Sonnet 4 / 3.7",
                max_output_tokens=64_000,
                efforts=_BUDGET_EFFORTS,
                thinking_budget=True,
            ),
        ),
        (r"claude-3-5-.*", ModelProfile("Claude 3.5", max_output_tokens=8_192)),
        (  # Claude 3 (Haiku, Sonnet, Opus) and older: images only, no PDFs (they came with 3.5)
            r"claude-(3-|2|instant).*",
            ModelProfile(
                "Claude 3",
                max_output_tokens=4_096,
                media=frozenset({"image"}),
                provider_tools=frozenset(),
            ),
        ),
        (  # an unknown versioned name (claude-fable-6-0, claude-opus-6): the newest rules
            r"claude-[a-z]+-\d.*",
            _NEWEST_CLAUDE,
        ),
        (r".*", ModelProfile("Claude", max_output_tokens=4_096, media=frozenset({"image"}))),
    ),
    "gemini": (  # Gemini 2.5 and 3 read images, documents and audio; older rows keep the default
        (r"gemini-3-pro.*", _gemini3("Gemini 3 Pro", frozenset({"low", "high"}))),  # retired
        (r"gemini-3\.\d+-pro.*", _gemini3("Gemini 3.x Pro", _GEMINI_LEVELS)),
        (  # 3.7 routes to 3.8 (rule 5): LOW | MEDIUM | HIGH, MINIMAL is a 400
            r"gemini-3\.([7-9]|\d{2,})-flash.*",
            _gemini3("Gemini 3.7+ Flash", _GEMINI_LEVELS),
        ),
        (  # the first Gemini 3 Flash (and its 3.x successors up to 3.6) took MINIMAL too
            r"gemini-3(\.[1-6])?-flash.*",
            _gemini3("Gemini 3 Flash", frozenset({"minimal", "low", "medium", "high"})),
        ),
        (
            r"gemini-3.*|gemini-([4-9]|\d{2,}).*",
            _gemini3("Gemini 3.8 (and later names)", _GEMINI_LEVELS),
        ),
        (
            r"gemini-2\.5.*",
            ModelProfile(
                "Gemini 2.5",
                thinking_budget=True,
                thinks_by_default=True,
                media=_GEMINI_MEDIA,
                provider_tools_with_functions=False,
            ),
        ),
        (r".*", ModelProfile("Gemini", provider_tools_with_functions=False)),  # 1.x, 2.0...
    ),
}

# The providers of SPEC 24 (issue 33). OpenAI-compatible families keep OpenAI's rows for the
# names OpenAI publishes (a router's "openai/gpt-oss-120b" is not OpenAI's gpt rows: none match)
# and add what each refuses: DeepSeek's reasoner ignores sampling settings silently (its API
# page: "will not trigger an error but will also have no effect"), so they are refused here;
# xAI's grok-4 refuses stop and reasoning_effort (grok-3-mini takes low/high); Groq's gpt-oss
# and Qwen 3 take low/medium/high. Bedrock and Vertex route by name: Claude names get
# Anthropic's rows, Gemini names Gemini's, with what the route lacks turned off (_routed);
# other Bedrock models send no output limit unless asked (their limits differ: 2k for Llama 3,
# 5k-10k for Nova), and read no media but Nova (Converse takes images and documents there).
_COMPATIBLE = ModelProfile("OpenAI-compatible chat models", media=frozenset({"image"}))
_FAMILY_ROWS: dict[str, tuple[tuple[str, ModelProfile], ...]] = {
    "deepseek": (
        (
            r"deepseek-reasoner.*|deepseek-r\d.*",
            ModelProfile(
                "DeepSeek reasoner", sampling=False, thinks_by_default=True, media=frozenset()
            ),
        ),
        (r".*", ModelProfile("DeepSeek chat", media=frozenset())),
    ),
    "xai": (
        (
            r"grok-3-mini.*",
            ModelProfile("xAI grok-3-mini", efforts=frozenset({"low", "high"}), media=frozenset()),
        ),
        (
            r"grok-([4-9]|\d{2,}).*",
            ModelProfile(
                "xAI grok-4 family", stop=False, thinks_by_default=True, media=frozenset({"image"})
            ),
        ),
        (r".*", _COMPATIBLE),
    ),
    "groq": (
        (
            r"(openai/)?gpt-oss.*|qwen/qwen3.*|qwen3.*",
            ModelProfile("Groq reasoning models", efforts=_O_EFFORTS, media=frozenset()),
        ),
        (r".*", _COMPATIBLE),
    ),
    "bedrock": (
        (
            r"(?:[a-z]{2,6}\.)?amazon\.nova-(pro|lite|premier).*",
            ModelProfile("Amazon Nova (Bedrock)"),
        ),
        (r".*", ModelProfile("Bedrock Converse models", media=frozenset())),
    ),
}
_TABLE.update(_FAMILY_ROWS)
_ROUTE_OFF: Mapping[str, str] = {"bedrock": "Bedrock", "vertex": "Vertex AI"}
"""Routes that serve Claude (and, on Vertex, Gemini) under their own names."""


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


_ROUTE_PREFIX = re.compile(r"^(?:[a-z]{2,6}\.)?anthropic\.")
"""Bedrock's ``anthropic.`` (and ``us.``/``eu.``/``global.`` inference-profile) prefix."""
_ROUTE_SUFFIX = re.compile(r"(?:@.*|-v\d+(?::\d+)?)$")
"""Vertex's ``@<date>`` and Bedrock's ``-v1:0`` version suffixes."""


def profile_for(provider: str, model: str) -> ModelProfile:
    """The profile of ``model`` at ``provider`` (OpenAI-compatible providers use OpenAI's rows).

    On ``bedrock`` and ``vertex`` a Claude name has Anthropic's row and a Gemini name (Vertex)
    Gemini's, without what the route lacks (``_routed``).
    """
    if provider in _ROUTE_OFF:
        return _routed(provider, model)
    return _match(provider, model)


@functools.lru_cache(maxsize=128)
def _routed(provider: str, model: str) -> ModelProfile:
    """Claude on Bedrock or Vertex: Anthropic's rules (append_only, adaptive thinking...).

    Mid-conversation system messages and tool changes are documented for the Claude API only
    (Bedrock Converse refused them for Fable 5.1, provider-rules Anthropic 2026 6), and
    server-side compaction is a beta of the Claude API: the route turns all three off, so the
    engine uses the forms every route takes (SPEC 28).
    """
    bare = _ROUTE_PREFIX.sub("", model.lower().rpartition("/")[2])
    if bare.startswith("claude"):
        found = _match("anthropic", model)
        return replace(
            found,
            family=f"{found.family} on {_ROUTE_OFF[provider]}",
            mid_conversation_system=False,
            mid_conversation_tools=False,
            server_compaction=False,
        )
    return _match("gemini" if provider == "vertex" else provider, model)


def _match(provider: str, model: str) -> ModelProfile:
    rows = _COMPILED.get(provider) or _COMPILED["openai"]
    name = _ROUTE_SUFFIX.sub("", _ROUTE_PREFIX.sub("", model.lower().rpartition("/")[2]))
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
        accepted = ", ".join(e for e in REASONING_EFFORTS if e in profile.efforts)
        raise _refuse(
            "reasoning_effort",
            model,
            f"{family} take {accepted or 'none (not a reasoning model)'}, not {effort!r}",
        )
    if settings.thinking_budget is not None and not profile.thinking_budget:
        why = (
            f"{family} think by effort or level, not by a budget: set "
            "ModelSettings.reasoning_effort instead"
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
