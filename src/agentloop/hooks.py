"""Hooks: user code that may veto a tool call (``Block``/``Ask``) or watch run boundaries.

Subclass ``Hook`` and override what you need. The first ``Block`` or ``Ask`` wins and later
hooks are not consulted; an explicit ``Allow`` does not stop evaluation. The agent's
``approver`` answers ``Ask``; with no approver (a headless run) ``Ask`` acts as ``Block`` with
its message.

Gates fail closed: a ``pre_tool`` answer that is not None, ``Allow``, ``Block`` or ``Ask``
blocks the call (``blocked: hook <HookClass> returned <value!r>, not a decision``); an approver
answer other than ``True`` denies it (``User denied permission``); an approver that raises
denies it (``approval failed: <ExcType>: <msg>``). Each is logged on the ``agentloop`` logger.
"""

from __future__ import annotations

from collections.abc import Awaitable, Iterable, Sequence
from typing import TYPE_CHECKING, Protocol, TypeAlias

from agentloop._util.slots import record
from agentloop.messages import Message, ToolCallPart, ToolResultPart
from agentloop.tools import ToolContext

if TYPE_CHECKING:
    from agentloop.run import Run

__all__ = [
    "Allow",
    "Approver",
    "Ask",
    "Block",
    "Hook",
    "PolicyHook",
    "PreToolDecision",
    "overrides",
]


@record
class Allow:
    """Explicitly allow the call (later hooks are still consulted)."""


@record
class Block:
    """Veto the call; the model reads ``reason`` verbatim as a soft error."""

    reason: str


@record
class Ask:
    """Ask a human; headless runs treat it as ``Block(message)``."""

    message: str


PreToolDecision: TypeAlias = Allow | Block | Ask | None


class Approver(Protocol):
    """Answers ``Ask`` decisions: a sync or async callable ``(call, message) -> bool``."""

    def __call__(self, call: ToolCallPart, message: str, /) -> bool | Awaitable[bool]:
        """Return exactly True to let the call run; anything else denies it."""
        ...


class Hook:
    """No-op base class: override any method."""

    async def pre_tool(self, call: ToolCallPart, ctx: ToolContext) -> PreToolDecision:
        """Before each attempt of a tool call."""
        return None

    async def post_tool(self, call: ToolCallPart, result: ToolResultPart, ctx: ToolContext) -> None:
        """After each attempt that ran (not after a veto)."""

    async def pre_compact(self, messages: Sequence[Message], estimate: int) -> bool | None:
        """Before a compaction pass; return False to veto it."""
        return None

    async def on_run_start(self, run: Run) -> None:
        """When a run starts."""

    async def on_run_end(self, run: Run) -> None:
        """When a run ends (after finalize)."""


class PolicyHook(Hook):
    """The built-in permission policy: deny lists, an allow list, and tools that need asking.

    Denials read ``blocked by policy: <why>``; a denied name wins over an allowed one; an empty
    allow list (None) allows every tool not denied. Tools in ``ask`` produce ``Ask``, which a
    headless run treats as a block and an interactive run hands to the approver.
    """

    def __init__(
        self,
        *,
        deny: Iterable[str] = (),
        allow: Iterable[str] | None = None,
        ask: Iterable[str] = (),
        deny_all: bool = False,
    ) -> None:
        self.deny = frozenset(deny)
        self.allow = None if allow is None else frozenset(allow)
        self.ask = frozenset(ask)
        self.deny_all = deny_all

    @classmethod
    def denying_everything(cls) -> PolicyHook:
        """A policy that blocks every tool call."""
        return cls(deny_all=True)

    async def pre_tool(self, call: ToolCallPart, ctx: ToolContext) -> PreToolDecision:
        """Apply the policy to one call."""
        if self.deny_all:
            return Block("blocked by policy: every tool call is denied")
        if call.name in self.deny:
            return Block(f"blocked by policy: tool '{call.name}' is denied")
        if self.allow is not None and call.name not in self.allow:
            return Block(f"blocked by policy: tool '{call.name}' is not in the allowlist")
        if call.name in self.ask:
            return Ask(f"permission required: allow tool '{call.name}'?")
        return Allow()


def overrides(obj: object, base: type, method: str) -> bool:
    """Whether ``obj``'s class overrides ``base.method`` (so no-op calls can be skipped)."""
    return getattr(type(obj), method, None) is not getattr(base, method)
