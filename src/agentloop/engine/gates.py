"""The gates around a tool call: pre-tool hooks and the approver before, post-tool hooks after.

They fail closed: a hook's answer that is not a decision blocks the call; an approver's answer
other than exactly ``True`` denies it; an approver that raises denies it. Each is logged, and
user code's broken ``__str__`` or ``__repr__`` never turns a denial into a crash (``said``). A
hook that raises in ``pre_tool`` is a hard ``InternalError`` (the call did not run).

Each hook and the approver get their own copy of the call (``_copy``): what one of them does to
``call.arguments`` reaches neither the next gate, nor the tool, nor the recorded history. What
was approved is what runs and what is recorded.
"""

from __future__ import annotations

import copy
import inspect
import logging
from collections.abc import Sequence

from agentloop.engine.invoke import said
from agentloop.errors import InternalError
from agentloop.hooks import Allow, Approver, Ask, Block, Hook, overrides
from agentloop.messages import ToolCallPart, ToolResultPart
from agentloop.tools import ToolContext

__all__ = ["Gates"]

logger = logging.getLogger("agentloop")


class Gates:
    """An agent's pre- and post-tool hooks and its approver."""

    __slots__ = ("approver", "post_hooks", "pre_hooks")

    def __init__(self, hooks: Sequence[Hook], approver: Approver | None) -> None:
        self.pre_hooks = tuple(h for h in hooks if overrides(h, Hook, "pre_tool"))
        self.post_hooks = tuple(h for h in hooks if overrides(h, Hook, "post_tool"))
        self.approver = approver

    async def veto(self, call: ToolCallPart, ctx: ToolContext) -> str | None:
        """The veto text of the first Block/Ask that is not approved, or None to proceed."""
        for hook in self.pre_hooks:
            try:
                decision = await hook.pre_tool(_copy(call), ctx)
            except Exception as exc:
                raise InternalError(
                    f"hook {type(hook).__name__} raised in pre_tool for tool '{call.name}' "
                    f"(the call did not run): {type(exc).__name__}: {said(exc)}"
                ) from exc
            if decision is None or isinstance(decision, Allow):
                continue
            if isinstance(decision, Block):
                return decision.reason
            if isinstance(decision, Ask):
                if self.approver is None:
                    return decision.message
                denial = await self._approve(self.approver, call, decision.message)
                if denial is None:
                    continue
                return denial
            shown = said(decision, as_repr=True)
            logger.error(
                "hook %s returned %s for tool '%s' (call %s), not a decision; the call is blocked",
                type(hook).__name__,
                shown,
                call.name,
                call.id,
            )
            return f"blocked: hook {type(hook).__name__} returned {shown}, not a decision"
        return None

    async def after(self, call: ToolCallPart, result: ToolResultPart, ctx: ToolContext) -> None:
        """Run the post-tool hooks on a result."""
        for hook in self.post_hooks:
            await hook.post_tool(_copy(call), result, ctx)

    @staticmethod
    async def _approve(approver: Approver, call: ToolCallPart, message: str) -> str | None:
        """None when the approver answered exactly ``True``; else the denial the model reads."""
        try:
            answer = approver(_copy(call), message)
            if inspect.isawaitable(answer):
                answer = await answer
        except Exception as exc:
            logger.error(
                "approver raised for tool '%s' (call %s); the call is denied",
                call.name,
                call.id,
                exc_info=True,
            )
            return f"approval failed: {type(exc).__name__}: {said(exc)}"
        if answer is True:
            return None
        if answer is not False:
            logger.warning(
                "approver answered %s for tool '%s' (call %s), not True; the call is denied",
                said(answer, as_repr=True),
                call.name,
                call.id,
            )
        return "User denied permission"


def _copy(call: ToolCallPart) -> ToolCallPart:
    """The call with arguments of its own, for one gate (hooks and approvers are user code)."""
    return ToolCallPart(call.id, call.name, copy.deepcopy(dict(call.arguments)))
