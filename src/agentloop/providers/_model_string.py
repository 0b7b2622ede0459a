"""``"provider:model"`` strings: the short way to name a client (SPEC 21).

``Agent("openai:gpt-5-mini")``, ``FallbackClient(["openai:gpt-5-mini", "gemini:gemini-2.5-pro"])``
and ``agent.override(model="ollama:llama3.2")`` take the string the peers take. It builds the
client ``build_client(Settings(provider, model))`` builds: the key from the provider's
environment variable, retries on (``RetryingClient``). The provider is everything before the
first colon, so a model name may hold colons of its own (``"ollama:llama3.2:3b"``,
``"openrouter:meta-llama/x:free"``).
Anything that is not a known provider and a model is a ``ConfigurationError`` listing the
providers. For a base URL, a timeout or a key of your own, build the client with ``Settings``.
"""

from __future__ import annotations

from agentloop._util.suggest import suggest
from agentloop.errors import ConfigurationError
from agentloop.model import ClosableModelClient
from agentloop.providers.settings import PROVIDERS, Settings, build_client

__all__ = ["client_from_string", "parse_model_string"]

_LIKELY = {
    "google": "gemini",
    "google-gla": "gemini",
    "google-vertex": "vertex",
    "vertexai": "vertex",
    "vertex_ai": "vertex",
    "aws": "bedrock",
    "azure-openai": "azure",
    "azure_openai": "azure",
    "grok": "xai",
    "hf": "huggingface",
    "together_ai": "together",
    "fireworks_ai": "fireworks",
    "openai-responses": "openai",
    "openai-chat": "openai",
    "claude": "anthropic",
}
"""Provider words other libraries use, and ours."""


def parse_model_string(spec: str) -> tuple[str, str]:
    """``(provider, model)`` of ``"provider:model"``; a ``ConfigurationError`` names the fix."""
    provider, colon, model = spec.strip().partition(":")
    provider = provider.strip().lower()
    model = model.strip()
    if colon and provider in PROVIDERS and model:
        return provider, model
    known = ", ".join(PROVIDERS)
    if not colon:
        guess = provider if provider in PROVIDERS else "openai"
        example = f"'{guess}:<model>'" if provider in PROVIDERS else f"'{guess}:{spec.strip()}'"
        problem = f"model string {spec!r} needs a provider and a model, such as {example}"
    elif provider not in PROVIDERS:
        ours = _LIKELY.get(provider) or suggest(provider, PROVIDERS, 0.6)
        hint = f" (did you mean '{ours}:{model}'?)" if ours else ""
        problem = f"unknown provider {provider!r} in model string {spec!r}{hint}"
    else:
        problem = f"model string {spec!r} names no model after the colon"
    raise ConfigurationError(
        f"{problem}; providers: {known} (or pass a ModelClient: build_client(Settings(...)))",
        field="model",
    )


def client_from_string(spec: str) -> ClosableModelClient:
    """The client for ``"provider:model"``, as ``build_client(Settings(provider, model))``.

    Raises:
        ConfigurationError: Not a ``provider:model`` string of a known provider.
        AuthError: The provider needs a key and its environment variable is not set.
    """
    provider, model = parse_model_string(spec)
    return build_client(Settings(provider=provider, model=model))
