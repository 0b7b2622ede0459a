"""Provider adapters, the HTTP layer they share, and ``Settings``/``build_client``.

Eager exports are the OpenAI-compatible adapters and the settings; the wrappers and the other
vendors' adapters load on first access (module ``__getattr__``), so importing this package
never fails because one sibling module is absent and never imports aiohttp.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from agentloop.providers.openai import OllamaClient, OpenAIClient, OpenRouterClient
from agentloop.providers.settings import Settings, build_client

if TYPE_CHECKING:
    from agentloop.providers.anthropic import AnthropicClient
    from agentloop.providers.fallback import FallbackClient
    from agentloop.providers.gemini import GeminiClient
    from agentloop.providers.retrying import RetryingClient

__all__ = [
    "AnthropicClient",
    "FallbackClient",
    "GeminiClient",
    "OllamaClient",
    "OpenAIClient",
    "OpenRouterClient",
    "RetryingClient",
    "Settings",
    "build_client",
]

_LAZY = {
    "RetryingClient": "agentloop.providers.retrying",
    "FallbackClient": "agentloop.providers.fallback",
    "AnthropicClient": "agentloop.providers.anthropic",
    "GeminiClient": "agentloop.providers.gemini",
}


def __getattr__(name: str) -> Any:
    """Load ``RetryingClient``, ``FallbackClient``, ``AnthropicClient``, ``GeminiClient`` lazily."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
