"""Provider adapters, the HTTP layer they share, and ``Settings``/``build_client``.

Eager exports are the OpenAI-compatible adapters and the settings; the wrappers and the other
vendors' adapters load on first access (module ``__getattr__``), so importing this package
never fails because one sibling module is absent and never imports aiohttp.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentloop._util.lazy import lazy_exports
from agentloop.providers.openai import (
    AzureOpenAIClient,
    CompatibleClient,
    OllamaClient,
    OpenAIClient,
    OpenRouterClient,
)
from agentloop.providers.settings import Settings, build_client

if TYPE_CHECKING:
    from agentloop.providers.anthropic import AnthropicClient
    from agentloop.providers.bedrock import BedrockClient
    from agentloop.providers.fallback import FallbackClient
    from agentloop.providers.gemini import GeminiClient
    from agentloop.providers.responses import OpenAIResponsesClient
    from agentloop.providers.retrying import RetryingClient
    from agentloop.providers.vertex import VertexClient

__all__ = [
    "AnthropicClient",
    "AzureOpenAIClient",
    "BedrockClient",
    "CompatibleClient",
    "FallbackClient",
    "GeminiClient",
    "OllamaClient",
    "OpenAIClient",
    "OpenAIResponsesClient",
    "OpenRouterClient",
    "RetryingClient",
    "Settings",
    "VertexClient",
    "build_client",
]

_LAZY = {
    "RetryingClient": "agentloop.providers.retrying",
    "FallbackClient": "agentloop.providers.fallback",
    "AnthropicClient": "agentloop.providers.anthropic",
    "GeminiClient": "agentloop.providers.gemini",
    "OpenAIResponsesClient": "agentloop.providers.responses",
    "BedrockClient": "agentloop.providers.bedrock",
    "VertexClient": "agentloop.providers.vertex",
}


if not TYPE_CHECKING:  # mypy sees the imports above, and no other name
    __getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
