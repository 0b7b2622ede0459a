"""agentloop: LLM agent loops that do not fall over.

Soft errors are tool results the model reads; hard errors are typed exceptions from
``agentloop.errors`` that end a run after it is finalized.
"""

from agentloop.cancel import CancelToken
from agentloop.config import RunConfig
from agentloop.engine import Agent
from agentloop.errors import AgentLoopError, ToolError
from agentloop.hooks import Allow, Ask, Block, Hook, PolicyHook
from agentloop.messages import Message, TextPart, ToolCallPart, ToolResultPart, Usage
from agentloop.model import ModelClient, ModelRequest, ModelResponse, ModelSettings, StreamEvent
from agentloop.observers import Observer
from agentloop.run import ConversationSummary, Run, Turn
from agentloop.tools import Tool, ToolContext, ToolOutput, ToolRegistry, tool

_LAZY = {
    "Settings": "agentloop.providers.settings",
    "build_client": "agentloop.providers.settings",
    "RetryingClient": "agentloop.providers.retrying",
    "FallbackClient": "agentloop.providers.fallback",
}


def __getattr__(name: str) -> object:
    """Provider names load lazily so ``import agentloop`` never imports aiohttp."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agentloop' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


__all__ = [
    "Agent",
    "AgentLoopError",
    "Allow",
    "Ask",
    "Block",
    "CancelToken",
    "ConversationSummary",
    "FallbackClient",
    "Hook",
    "Message",
    "ModelClient",
    "ModelRequest",
    "ModelResponse",
    "ModelSettings",
    "RetryingClient",
    "Observer",
    "PolicyHook",
    "Run",
    "RunConfig",
    "Settings",
    "StreamEvent",
    "TextPart",
    "Tool",
    "ToolCallPart",
    "ToolContext",
    "ToolError",
    "ToolOutput",
    "ToolRegistry",
    "ToolResultPart",
    "Turn",
    "Usage",
    "build_client",
    "tool",
]
