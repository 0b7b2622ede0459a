"""``ModelSettings`` as Messages API fields, and the rules a request must keep (SPEC 16).

Every refusal here is a ``ConfigurationError`` naming the setting and the model, raised before
the request is sent: never an HTTP 400 after a tool already ran, never retried, never a reason to
fall back. The rules come from the model's profile (``profiles.profile_for("anthropic", model)``)
and from provider-rules Anthropic 3 and 4:

- ``max_tokens`` is always sent (the API requires it): ``ModelSettings.max_tokens``, else the
  client's ``max_tokens=``, else the profile's default output limit (128k for Opus 4.6+ and
  the 5.x flagships, 64k for the other Claude 4.5+ and Sonnet 4, 32k for Opus 4, 8k for 3.5,
  4k for Claude 3).
- Claude 4.7 and later (the profile's ``adaptive_thinking``, provider-rules Anthropic 2026 7):
  ``reasoning_effort`` (low, medium, high, xhigh, max) sends ``thinking: {"type": "adaptive"}``
  and ``output_config: {"effort": ...}``; ``"none"`` sends neither (no thinking);
  ``thinking_budget``, and ``"minimal"``, are refused before sending (the error names
  ``reasoning_effort``), and so is a ``thinking`` of type ``enabled`` in ``extra_body``.
- Claude 4.6 and earlier: ``thinking_budget=N`` sends
  ``thinking: {"type": "enabled", "budget_tokens": N}``;
  ``reasoning_effort`` goes through ``profiles.ANTHROPIC_EFFORT_BUDGETS`` (``"none"``: no
  thinking); ``thinking_budget=0`` means no thinking too. Both at once is refused (which one
  was meant?). An explicit budget is sent as given: under 1024 (the API's minimum) or not below
  ``max_tokens`` it is refused, naming both numbers. An effort's budget is capped at three
  quarters of ``max_tokens`` so the answer keeps room (``"high"`` on Opus 4's 32k limit thinks
  for 24k), and refused when even 1024 does not fit.
- With thinking on (enabled or adaptive, from settings or ``extra_body``): ``temperature``
  other than 1, ``top_k``, ``top_p`` under 0.95, and a forced ``tool_choice`` (``any``/
  ``required`` or a tool name) are refused.
- Claude 4.5 and later take ``temperature`` or ``top_p``, not both.
- ``seed`` has no Anthropic field, and ``temperature`` above 1 is out of the API's range.

``extra_body`` is merged into the payload key by key (``profiles.merge_body``), and the thinking
and sampling rules are checked on the merged payload, so a field set there is held to them too.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from agentloop.errors import ConfigurationError
from agentloop.model import ModelSettings
from agentloop.providers.profiles import (
    ANTHROPIC_EFFORT_BUDGETS,
    ModelProfile,
    check_settings,
    profile_for,
)

__all__ = ["MIN_THINKING_BUDGET", "check_payload", "profile", "settings_fields"]

MIN_THINKING_BUDGET = 1024
"""The API's smallest ``budget_tokens``."""

_FALLBACK_MAX_TOKENS = 4096
_FORCED = frozenset({"any", "tool"})
_MIN_TOP_P_THINKING = 0.95


@lru_cache(maxsize=64)
def profile(model: str) -> ModelProfile:
    """The profile of an Anthropic model (cached: the table is matched once per model name)."""
    return profile_for("anthropic", model)


def _refuse(setting: str, model: str, why: str) -> ConfigurationError:
    return ConfigurationError(
        f"{model} does not take ModelSettings.{setting}: {why}", field=setting
    )


def _budget(settings: ModelSettings, model: str, limit: int) -> int | None:
    """The thinking budget the settings ask for within ``limit`` (None: no thinking)."""
    effort, budget = settings.reasoning_effort, settings.thinking_budget
    if budget is None:
        wanted = None if effort is None else ANTHROPIC_EFFORT_BUDGETS[effort]
        if wanted is None:
            return None
        budget = min(wanted, limit * 3 // 4)  # a quarter of the output stays for the answer
        if budget < MIN_THINKING_BUDGET:
            raise _refuse(
                "reasoning_effort",
                model,
                f"max_tokens ({limit}) leaves no room for the smallest thinking budget "
                f"({MIN_THINKING_BUDGET} budget_tokens)",
            )
        return budget
    if effort is not None:
        raise _refuse("thinking_budget", model, "set reasoning_effort or thinking_budget, not both")
    if 0 < budget < MIN_THINKING_BUDGET:
        raise _refuse(
            "thinking_budget",
            model,
            f"budget_tokens must be >= {MIN_THINKING_BUDGET}, got {budget}",
        )
    return budget or None


def _adaptive(settings: ModelSettings, append_only: bool) -> dict[str, Any]:
    """Claude 4.7 and later: adaptive thinking at ``output_config.effort`` (``"none"``: off).

    ``check_settings`` has already refused ``thinking_budget`` and efforts the model lacks. On
    an append-only model, ``thinking_prefix_mismatch`` is SPEC 28's escape hatch (rule 3).
    """
    effort = settings.reasoning_effort
    if effort is None or effort == "none":
        return {}
    thinking: dict[str, Any] = {"type": "adaptive"}
    if append_only and settings.thinking_prefix_mismatch:
        thinking["block_binding"] = {"prefix_mismatch_behavior": settings.thinking_prefix_mismatch}
    return {"thinking": thinking, "output_config": {"effort": effort}}


def _tool_choice(choice: str) -> dict[str, Any]:
    fixed = {"auto": "auto", "required": "any", "any": "any", "none": "none"}
    if choice in fixed:
        return {"type": fixed[choice]}
    return {"type": "tool", "name": choice}


def settings_fields(settings: ModelSettings, model: str, max_tokens: int | None) -> dict[str, Any]:
    """The payload fields ``settings`` set for ``model`` (``max_tokens``: the client's override).

    Raises ``ConfigurationError`` for a setting the model refuses (before sending).
    """
    found = profile(model)
    check_settings(found, model, settings)
    if settings.seed is not None:
        raise ConfigurationError("anthropic cannot forward ModelSettings.seed", field="seed")
    if settings.temperature is not None and settings.temperature > 1.0:
        raise ConfigurationError(
            f"anthropic accepts temperature in [0, 1], got {settings.temperature}",
            field="temperature",
        )
    limit = settings.max_tokens or max_tokens or found.max_output_tokens or _FALLBACK_MAX_TOKENS
    out: dict[str, Any] = {"max_tokens": limit}
    if found.adaptive_thinking:
        out.update(_adaptive(settings, found.append_only))
    elif settings.reasoning_effort is not None or settings.thinking_budget is not None:
        budget = _budget(settings, model, limit)
        if budget is not None:
            out["thinking"] = {"type": "enabled", "budget_tokens": budget}
    if settings.temperature is not None:
        out["temperature"] = settings.temperature
    if settings.top_p is not None:
        out["top_p"] = settings.top_p
    if settings.stop:
        out["stop_sequences"] = list(settings.stop)
    if settings.tool_choice is not None:
        out["tool_choice"] = _tool_choice(settings.tool_choice)
    return out


def check_payload(payload: Mapping[str, Any], model: str) -> None:
    """The rules on the final payload (``extra_body`` merged): thinking's, and sampling's."""
    thinking = payload.get("thinking")
    kind = thinking.get("type") if isinstance(thinking, Mapping) else None
    if kind == "enabled" and profile(model).adaptive_thinking:
        raise ConfigurationError(
            f"{model} rejects thinking type 'enabled' (Claude 4.7 and later think adaptively): "
            "set ModelSettings.reasoning_effort instead of a thinking budget",
            field="reasoning_effort",
        )
    if isinstance(thinking, Mapping) and kind in ("enabled", "adaptive"):
        _check_thinking(payload, thinking, model)
    if (
        "temperature" in payload
        and "top_p" in payload
        and not profile(model).temperature_with_top_p
    ):
        raise _refuse(
            "top_p", model, f"{profile(model).family} take temperature or top_p, not both"
        )


def _check_thinking(payload: Mapping[str, Any], thinking: Mapping[str, Any], model: str) -> None:
    """Provider-rules Anthropic 3: what thinking cannot be combined with."""
    budget, limit = thinking.get("budget_tokens"), payload.get("max_tokens")
    if isinstance(budget, int) and isinstance(limit, int) and budget >= limit:
        raise _refuse(
            "thinking_budget",
            model,
            f"the thinking budget ({budget} budget_tokens) must be less than max_tokens ({limit})",
        )
    temperature = payload.get("temperature")
    if temperature is not None and temperature != 1:
        raise _refuse("temperature", model, "with thinking on, temperature may only be 1")
    if "top_k" in payload:
        raise ConfigurationError(
            f"{model} does not take top_k (extra_body) with thinking on: it must be unset",
            field="top_k",
        )
    top_p = payload.get("top_p")
    if isinstance(top_p, int | float) and top_p < _MIN_TOP_P_THINKING:
        raise _refuse("top_p", model, f"with thinking on, top_p must be >= {_MIN_TOP_P_THINKING}")
    choice = payload.get("tool_choice")
    if isinstance(choice, Mapping) and choice.get("type") in _FORCED:
        raise _refuse(
            "tool_choice", model, "thinking cannot be on when tool_choice forces tool use"
        )
