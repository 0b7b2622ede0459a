"""agentloop: LLM agent loops that do not fall over.

Soft errors are tool results the model reads; hard errors are typed exceptions from
``agentloop.errors`` that end a run after it is finalized.

Every public name loads on first access (``agentloop._util.lazy``): ``import agentloop`` imports
none of asyncio, pydantic or aiohttp. ``dir(agentloop)`` lists the public names only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentloop._util.lazy import lazy_exports

if TYPE_CHECKING:
    from agentloop.batching import BatchWait
    from agentloop.cancel import CancelToken
    from agentloop.config import RunConfig
    from agentloop.engine.agent import Agent
    from agentloop.engine.session import Session
    from agentloop.errors import AgentLoopError, ToolError
    from agentloop.handoffs import handoff
    from agentloop.hooks import Allow, Ask, Block, Hook, PolicyHook
    from agentloop.messages import Message, TextPart, ToolCallPart, ToolResultPart, Usage
    from agentloop.model import ModelClient, ModelRequest, ModelResponse, ModelSettings, StreamEvent
    from agentloop.observers import Observer
    from agentloop.pausing import Answer, Approve, Deny, Edit, PendingCall
    from agentloop.providers.fallback import FallbackClient
    from agentloop.providers.retrying import RetryingClient
    from agentloop.providers.settings import Settings, build_client
    from agentloop.run import ConversationSummary, Run, RunContext, Turn
    from agentloop.safety.budget import Budget
    from agentloop.tools import Tool, ToolContext, ToolOutput, ToolRegistry, tool

_EXPORTS = {
    "Agent": "agentloop.engine.agent",
    "AgentLoopError": "agentloop.errors",
    "Allow": "agentloop.hooks",
    "Answer": "agentloop.pausing",
    "Approve": "agentloop.pausing",
    "Ask": "agentloop.hooks",
    "BatchWait": "agentloop.batching",
    "Block": "agentloop.hooks",
    "Budget": "agentloop.safety.budget",
    "CancelToken": "agentloop.cancel",
    "ConversationSummary": "agentloop.run",
    "Deny": "agentloop.pausing",
    "Edit": "agentloop.pausing",
    "FallbackClient": "agentloop.providers.fallback",
    "Hook": "agentloop.hooks",
    "Message": "agentloop.messages",
    "ModelClient": "agentloop.model",
    "ModelRequest": "agentloop.model",
    "ModelResponse": "agentloop.model",
    "ModelSettings": "agentloop.model",
    "Observer": "agentloop.observers",
    "PendingCall": "agentloop.pausing",
    "PolicyHook": "agentloop.hooks",
    "RetryingClient": "agentloop.providers.retrying",
    "Run": "agentloop.run",
    "RunConfig": "agentloop.config",
    "RunContext": "agentloop.run",
    "Session": "agentloop.engine.session",
    "Settings": "agentloop.providers.settings",
    "StreamEvent": "agentloop.model",
    "TextPart": "agentloop.messages",
    "Tool": "agentloop.tools",
    "ToolCallPart": "agentloop.messages",
    "ToolContext": "agentloop.tools",
    "ToolError": "agentloop.errors",
    "ToolOutput": "agentloop.tools",
    "ToolRegistry": "agentloop.tools",
    "ToolResultPart": "agentloop.messages",
    "Turn": "agentloop.run",
    "Usage": "agentloop.messages",
    "build_client": "agentloop.providers.settings",
    "handoff": "agentloop.handoffs",
    "tool": "agentloop.tools",
}

_RUN = "run an agent itself: `run = await agent.run(input)` or `agent.run_sync(input)`"

_PEER_NAMES = {
    "Runner": _RUN,
    "function_tool": "decorate the function with @tool (from agentloop import tool)",
    "RunContextWrapper": "annotate a tool's first parameter ctx: ToolContext[Deps]",
    "ModelRetry": "raise ToolError('what to fix'): the model reads it and tries again",
}
"""Names other agent libraries export, and what to use here (``from agentloop import Runner``
is an ``ImportError`` that says so; the agent's own words are in ``agentloop.engine.peers``)."""

if not TYPE_CHECKING:  # mypy sees the imports above, and no other name
    _lazy_getattr, __dir__ = lazy_exports(__name__, _EXPORTS, globals())

    def __getattr__(name: str) -> object:
        tip = _PEER_NAMES.get(name)
        if tip is not None:  # an ImportError: ``from agentloop import X`` shows its message
            raise ImportError(f"agentloop has no {name}: {tip}", name=__name__)
        return _lazy_getattr(name)


__all__ = [
    "Agent",
    "AgentLoopError",
    "Allow",
    "Answer",
    "Approve",
    "Ask",
    "BatchWait",
    "Block",
    "Budget",
    "CancelToken",
    "ConversationSummary",
    "Deny",
    "Edit",
    "FallbackClient",
    "Hook",
    "Message",
    "ModelClient",
    "ModelRequest",
    "ModelResponse",
    "ModelSettings",
    "Observer",
    "PendingCall",
    "PolicyHook",
    "RetryingClient",
    "Run",
    "RunConfig",
    "RunContext",
    "Session",
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
    "handoff",
    "tool",
]
