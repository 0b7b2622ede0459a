"""agentloop: LLM agent loops that do not fall over.

Soft errors are tool results the model reads; hard errors are typed exceptions from
``agentloop.errors`` that end a run after it is finalized.
"""

from agentloop.cancel import CancelToken
from agentloop.config import RunConfig
from agentloop.engine import Agent
from agentloop.hooks import Allow, Ask, Block, Hook
from agentloop.messages import Message, TextPart, ToolCallPart, ToolResultPart, Usage
from agentloop.model import ModelClient, ModelRequest, ModelResponse, ModelSettings, StreamEvent
from agentloop.observers import Observer
from agentloop.run import ConversationSummary, Run, Turn
from agentloop.tools import Tool, ToolContext, ToolOutput, ToolRegistry, tool

__all__ = [
    "Agent",
    "Allow",
    "Ask",
    "Block",
    "CancelToken",
    "ConversationSummary",
    "Hook",
    "Message",
    "ModelClient",
    "ModelRequest",
    "ModelResponse",
    "ModelSettings",
    "Observer",
    "Run",
    "RunConfig",
    "StreamEvent",
    "TextPart",
    "Tool",
    "ToolCallPart",
    "ToolContext",
    "ToolOutput",
    "ToolRegistry",
    "ToolResultPart",
    "Turn",
    "Usage",
    "tool",
]
