"""OpenAI's Responses API adapter, at the import path it had before ``providers/openai/``.

The adapter lives in ``agentloop.providers.openai.responses`` (beside Chat Completions: one
folder per wire). This module exists so that ``agentloop.providers.responses`` and
``from agentloop.providers.responses import OpenAIResponsesClient`` keep working; it re-exports
the same objects and adds nothing.
"""

from agentloop.providers.openai.responses import (
    REASONING_SUMMARIES,
    OpenAIResponsesClient,
    ResponsesStream,
    encode_request,
    failure,
    parse_response,
)

__all__ = [
    "REASONING_SUMMARIES",
    "OpenAIResponsesClient",
    "ResponsesStream",
    "encode_request",
    "failure",
    "parse_response",
]
