"""OpenAI's two wires: Chat Completions (``chat``) and the Responses API (``responses``).

``OpenAIClient`` implements ``ModelClient`` over ``POST {base_url}/chat/completions``, both as one
JSON reply and as an SSE stream; ``OpenRouterClient`` and ``OllamaClient`` are the same adapter
with another default ``base_url``/``provider`` (and no key for Ollama). The wire mapping is
described in ``chat``'s docstring, the Responses adapter (``OpenAIResponsesClient``) in
``responses``'s; this package re-exports the Chat Completions names, as the module
``agentloop.providers.openai`` did before it became a folder. The Responses names stay
importable from ``agentloop.providers.responses``.
"""

from agentloop.providers.openai.azure import AzureOpenAIClient
from agentloop.providers.openai.chat import (
    INVALID_JSON_KEY,
    ChatStreamAccumulator,
    OllamaClient,
    OpenAIClient,
    OpenRouterClient,
    decode_arguments,
    encode_request,
    parse_completion,
    prompt_cache_key,
)
from agentloop.providers.openai.families import FAMILIES, CompatibleClient, Family

__all__ = [
    "FAMILIES",
    "INVALID_JSON_KEY",
    "AzureOpenAIClient",
    "ChatStreamAccumulator",
    "CompatibleClient",
    "Family",
    "OllamaClient",
    "OpenAIClient",
    "OpenRouterClient",
    "decode_arguments",
    "encode_request",
    "parse_completion",
    "prompt_cache_key",
]
