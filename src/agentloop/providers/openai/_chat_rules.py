"""What OpenAI's Chat Completions endpoint refuses, checked before a request is sent.

``OpenAIClient`` asks ``ChatRules.check`` before every request; a request the model would refuse
is a ``ConfigurationError`` naming the setting and the model (SPEC 16), never a provider 400:

- ``profiles.check_settings``: reasoning models (o-series, gpt-5 family) take no ``temperature``
  other than 1, no ``top_p`` and no ``stop``; ``reasoning_effort`` only where the family takes
  that value; no model here takes ``thinking_budget``.
- A model served only by the Responses API (``gpt-5-pro``, ``o3-pro``, codex;
  ``ModelProfile.chat_completions`` False) is refused with the way to the Responses API.
- *Reported* (litellm #34569 and several integrators, not in OpenAI's docs): dotted gpt-5
  releases refuse function tools beside a reasoning effort on this endpoint, "Function tools
  with reasoning_effort are not supported for <model> in /v1/chat/completions". From gpt-5.5 on,
  the model's *default* effort counts, so tools need ``reasoning_effort="none"`` explicitly;
  gpt-5.2 to 5.4 refuse an explicit effort other than ``"none"``. We never send ``"none"`` on
  our own (it changes how the model works): the ``ConfigurationError`` says to set it, or to
  use the Responses API, which takes tools with any effort.

The last two are rules of OpenAI's own endpoint (api.openai.com, Azure, proxies that forward
to it), so they apply to every provider name but ``openrouter`` and ``ollama``, which route
models their own way. Sampling rules apply to every provider (OpenRouter would drop the value
silently).

The output limit's wire name comes from the profile too: but on OpenRouter and Ollama,
``max_completion_tokens`` for the reasoning families whatever the host (Azure and proxies too,
which used to get ``max_tokens`` and a 400); otherwise ``max_completion_tokens`` on
api.openai.com and ``max_tokens`` elsewhere (what OpenRouter, which translates it per model,
vLLM, llama.cpp and Ollama read). ``OpenAIClient(max_tokens_field=...)`` overrides it for every
model.

A 404 that says "only supported in v1/responses" (a Responses-only model the table does not
know yet) keeps its class, ``ModelNotFound``, but its message names the fix (``name_the_fix``).
"""

from __future__ import annotations

import re

from agentloop._util.slots import record
from agentloop.errors import ConfigurationError, ModelNotFound
from agentloop.model import ModelRequest
from agentloop.providers.profiles import ModelProfile, check_settings, profile_for

__all__ = ["RESPONSES_FIX", "ChatRules", "name_the_fix"]

RESPONSES_FIX = (
    'use the Responses API: Settings(provider="openai", api="responses") or OpenAIResponsesClient'
)
"""The way out named by every refusal that only the Responses API can serve."""

_DOTTED_GPT = re.compile(r"gpt-(\d+)\.(\d+)")
_RESPONSES_ONLY_404 = "only supported in v1/responses"
_PROFILE_CACHE_LIMIT = 64
_ROUTERS = frozenset({"openrouter", "ollama"})
"""Providers that route a model name their own way: OpenAI's endpoint rules are not theirs."""


@record
class _ModelRules:
    """What one model name resolves to, computed once per client and model."""

    profile: ModelProfile
    max_field: str
    tools_need_no_effort: tuple[int, int] | None


class ChatRules:
    """The per-client view of the profiles: one lookup per model name, then a dict hit."""

    def __init__(self, provider: str, host: str, max_tokens_field: str | None) -> None:
        self.provider = provider
        self.host = host
        self.override = max_tokens_field
        self.endpoint_rules = provider not in _ROUTERS
        self._models: dict[str, _ModelRules] = {}

    def _rules(self, model: str) -> _ModelRules:
        rules = self._models.get(model)
        if rules is None:
            profile = profile_for(self.provider, model)
            field = self.override or self._max_field(profile)
            if len(self._models) >= _PROFILE_CACHE_LIMIT:
                self._models.clear()
            rules = self._models[model] = _ModelRules(profile, field, _dotted_version(model))
        return rules

    def _max_field(self, profile: ModelProfile) -> str:
        if self.endpoint_rules and profile.max_tokens_field == "max_completion_tokens":
            return "max_completion_tokens"
        return "max_completion_tokens" if self.host == "api.openai.com" else "max_tokens"

    def profile(self, model: str) -> ModelProfile:
        """The profile of ``model``."""
        return self._rules(model).profile

    def max_field(self, model: str) -> str:
        """The wire name of ``ModelSettings.max_tokens`` for ``model``."""
        return self._rules(model).max_field

    def check(self, model: str, request: ModelRequest) -> ModelProfile:
        """Raise ``ConfigurationError`` for what ``model`` refuses; returns its profile."""
        rules = self._rules(model)
        profile = rules.profile
        if self.endpoint_rules and not profile.chat_completions:
            raise ConfigurationError(
                f"{model} is served only by the Responses API (/v1/responses), not by Chat "
                f"Completions: {RESPONSES_FIX}",
                field="model",
            )
        check_settings(profile, model, request.settings)
        if request.provider_tools:  # none on this wire (SPEC 24): loaded only to refuse them
            from agentloop.providers.openai._hosted import check_chat

            check_chat(request.provider_tools, model, self.provider)
        version = rules.tools_need_no_effort
        if self.endpoint_rules and version is not None and request.tools:
            _check_tools_with_effort(model, version, request)
        return profile


def _dotted_version(model: str) -> tuple[int, int] | None:
    """``(5, 5)`` for ``gpt-5.5...``; None for any other name (the tools rule is about these)."""
    match = _DOTTED_GPT.match(model.lower().rpartition("/")[2])
    if match is None:
        return None
    version = (int(match[1]), int(match[2]))
    return version if version >= (5, 2) else None


def _check_tools_with_effort(model: str, version: tuple[int, int], request: ModelRequest) -> None:
    effort = request.settings.reasoning_effort
    if effort == "none" or (effort is None and version < (5, 5)):
        return
    said = "its default reasoning effort" if effort is None else f"reasoning_effort={effort!r}"
    raise ConfigurationError(
        f"{model} does not take function tools with {said} on Chat Completions (OpenAI answers "
        f"400 'Function tools with reasoning_effort are not supported'): set "
        f'ModelSettings(reasoning_effort="none"), or {RESPONSES_FIX} to keep reasoning',
        field="reasoning_effort",
    )


def name_the_fix(error: ModelNotFound, model: str) -> ModelNotFound:
    """``error`` with its message naming the Responses API when OpenAI's 404 says so.

    OpenAI answers a Responses-only model on Chat Completions with 404 "This model is only
    supported in v1/responses and not in v1/chat/completions.": the model exists, so the bare
    "model not found" reading would send a user looking for a typo.
    """
    said = f"{error.message} {error.body or ''}"
    if _RESPONSES_ONLY_404 in said:
        error.message = (
            f"{model} is served only by the Responses API (/v1/responses), not by Chat "
            f"Completions: {RESPONSES_FIX} ({error.message})"
        )
        error.args = (error.message,)
    return error
