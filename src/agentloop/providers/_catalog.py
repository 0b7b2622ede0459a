"""The providers table of ``docs/providers.md``, made from the profile table (SPEC 24).

One row per provider (two where a route serves two families: Claude and Gemini on Vertex,
Claude and Nova on Bedrock): an example model string, the key variable, and what it supports,
read from ``profiles.profile_for`` for that model (reasoning efforts or budget, media kinds) and
from what each wire carries (provider tools, caching, streaming). ``tests/providers/
test_catalog.py`` fails when the page's table differs from ``provider_table()`` and prints the
new one, so the page cannot drift from the profiles.
"""

from __future__ import annotations

from collections.abc import Mapping

from agentloop.model import REASONING_EFFORTS
from agentloop.providers.bedrock._encode import caches as bedrock_caches
from agentloop.providers.profiles import ModelProfile, profile_for
from agentloop.providers.settings import DEFAULT_MODELS, KEY_ENV_VARS, PROVIDERS

__all__ = ["provider_table"]

_EXAMPLES: Mapping[str, tuple[str, ...]] = {
    "openai": ("gpt-5.4", "gpt-4o-mini"),
    "anthropic": ("claude-opus-4-7", "claude-sonnet-4-5"),
    "gemini": ("gemini-3.8-flash", "gemini-2.5-flash"),
    "azure": ("gpt-4o-mini",),  # a deployment named after its model
    "bedrock": ("us.anthropic.claude-sonnet-4-5-20250929-v1:0", "amazon.nova-lite-v1:0"),
    "vertex": ("gemini-2.5-flash", "claude-sonnet-4-5@20250929"),
    "xai": ("grok-4",),
    "deepseek": ("deepseek-reasoner",),
    "groq": ("openai/gpt-oss-120b",),
}
"""Models shown per provider (else the provider's default model)."""

_ANTHROPIC_TOOLS = "web_search, web_fetch, code_execution"
_GEMINI_TOOLS = "web_search, code_execution, web_fetch"
_TOOLS: Mapping[str, str] = {
    "openai": "web_search, code_execution, file_search (Responses API)",
    "anthropic": _ANTHROPIC_TOOLS,
    "gemini": _GEMINI_TOOLS,
}
"""Provider-native tools by wire (SPEC 24's list; every other provider refuses them)."""
_CACHING: Mapping[str, str] = {
    "openai": "automatic, session cache key",
    "openrouter": "automatic, session cache key",
    "anthropic": "cache_control breakpoints",
    "gemini": "implicit",
    "azure": "automatic",
}
_KEYS: Mapping[str, str] = {
    "bedrock": "AWS credential chain or AWS_BEARER_TOKEN_BEDROCK",
    "vertex": "Application Default Credentials",
    "ollama": "none",
}


def _reasoning(profile: ModelProfile) -> str:
    if profile.efforts:
        return "effort " + "/".join(e for e in REASONING_EFFORTS if e in profile.efforts)
    if profile.thinking_budget:
        return "budget"
    return "built in" if profile.thinks_by_default else "no"


def _caching(provider: str, model: str, wire: str) -> str:
    if provider == "bedrock":
        return "cachePoint blocks" if bedrock_caches(model) else "none"
    return _CACHING.get(wire, "none")


def _wire(provider: str, model: str) -> str:
    """The wire a provider's model is spoken in (which tools and caching it has)."""
    if provider == "vertex":
        return "anthropic" if model.startswith("claude") else "gemini"
    return provider


def _row(provider: str, model: str) -> str:
    profile = profile_for(provider, model)
    wire = _wire(provider, model)
    key = _KEYS.get(provider) or KEY_ENV_VARS.get(provider) or "none"
    cells = (
        provider,
        f"`{provider}:{model}`",
        key,
        _reasoning(profile),
        ", ".join(sorted(profile.media)) or "text only",
        _TOOLS.get(wire, "none"),
        _caching(provider, model, wire),
        "AWS event stream" if provider == "bedrock" else "SSE",
    )
    return "| " + " | ".join(cells) + " |"


def provider_table() -> str:
    """The Markdown table: provider, model string, key variable, and what it supports."""
    head = (
        "| Provider | Model string | Key | Reasoning | Media | Provider tools | Caching "
        "| Streaming |\n|---|---|---|---|---|---|---|---|"
    )
    rows = [
        _row(provider, model)
        for provider in PROVIDERS
        for model in _EXAMPLES.get(provider) or (DEFAULT_MODELS[provider],)
    ]
    return "\n".join([head, *rows]) + "\n"
