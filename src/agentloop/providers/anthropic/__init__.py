"""The Anthropic Messages API adapter: agentloop messages in, ``ModelResponse`` out.

``AnthropicClient`` speaks ``POST {base_url}/v1/messages`` through the shared ``HttpTransport``,
both as one JSON reply and as SSE. The wire rules it owns are described in ``client``'s
docstring; settings, media, replies and streams live in the private modules beside it. This
package re-exports the public names, as the module ``agentloop.providers.anthropic`` did before
it became a folder.
"""

from agentloop.providers.anthropic.client import (
    ANTHROPIC_VERSION,
    EPHEMERAL,
    AnthropicClient,
    AnthropicStreamState,
    build_payload,
    error_from_body,
    mark_transcript,
    parse_response,
)
from agentloop.providers.anthropic.client import encode_messages as encode_messages

# ``encode_messages`` was never in ``__all__`` but is in the reference: it stays importable here.

__all__ = [
    "ANTHROPIC_VERSION",
    "EPHEMERAL",
    "AnthropicClient",
    "AnthropicStreamState",
    "build_payload",
    "error_from_body",
    "mark_transcript",
    "parse_response",
]
