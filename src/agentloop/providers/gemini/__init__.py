"""The Gemini ``generateContent`` adapter: agentloop messages in, ``ModelResponse`` out.

``GeminiClient`` speaks ``POST {base_url}/models/{model}:generateContent`` and
``:streamGenerateContent?alt=sse`` through the shared ``HttpTransport``; the key travels in the
``x-goog-api-key`` header, never in the URL. The wire rules are described in ``client``'s
docstring; encoding, media and replies live in the private modules beside it. This package
re-exports the public names, as the module ``agentloop.providers.gemini`` did before it became a
folder.
"""

from agentloop.providers.gemini.client import (
    BYPASS_SIGNATURE,
    REFUSALS,
    GeminiClient,
    GeminiStreamState,
    build_payload,
    encode_contents,
    parse_response,
)

__all__ = [
    "BYPASS_SIGNATURE",
    "REFUSALS",
    "GeminiClient",
    "GeminiStreamState",
    "build_payload",
    "encode_contents",
    "parse_response",
]
