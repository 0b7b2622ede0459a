"""The gates around a tool call: pre-tool hooks and the approver before, post-tool hooks after.

They fail closed: a hook's answer that is not a decision blocks the call; an approver's answer
other than exactly ``True`` denies it; an approver that raises denies it. Each is logged, and
user code's broken ``__str__`` or ``__repr__`` never turns a denial into a crash (``said``). A
hook that raises in ``pre_tool`` is a hard ``InternalError`` (the call did not run).

Each hook and the approver get their own copy of the call (``_copy``): what one of them does to
``call.arguments`` reaches neither the next gate, nor the tool, nor the recorded history. What
was approved is what runs and what is recorded.

A call can also become **pending** (SPEC 17): a hook's ``Ask`` with no approver when the run is
not headless, a tool declared ``requires_approval`` with no approver, and every call of a tool
declared ``external`` (after the hooks, which run first). ``veto`` then answers ``Asked``. A sync
approver runs on a worker thread, as sync tools do: one waiting on ``input()`` freezes no other run.

**Nobody is asked about a call that cannot run.** Before a call goes to the approver or becomes
pending, its arguments are validated as the tool's own call would validate them (``_invalid``,
the dispatch's check): arguments that do not validate are answered at once with the usual soft
``Invalid arguments for tool ...`` text, in the same turn, so the model fixes them and no person
spends an approval on an error. Only where a person would be asked: a hook's ``Block``, a
headless ``Ask`` and a tool that asks nobody are as they were.
"""

from __future__ import annotations

import copy
import inspect
import logging
from collections.abc import Sequence

from agentloop._util.slots import record
from agentloop._util.threads import in_daemon_thread
from agentloop.engine.invoke import _checked, said
from agentloop.errors import InternalError
from agentloop.hooks import Allow, Approver, Ask, Block, Hook, overrides
from agentloop.messages import ToolCallPart, ToolResultPart
from agentloop.pausing import PendingKind
from agentloop.tools import Tool, ToolContext

__all__ = ["Asked", "Gates"]

logger = logging.getLogger("agentloop")


@record
class Asked:
    """The call is pending (SPEC 17): ``kind`` and the hook's ``Ask`` text (or None)."""

    kind: PendingKind
    message: str | None = None


APPROVAL_TEXT = "tool '{name}' requires approval"
"""What the approver is asked with for a ``requires_approval`` call no hook asked about."""


class Gates:
    """An agent's pre- and post-tool hooks and its approver."""

    __slots__ = ("approver", "headless", "post_hooks", "pre_hooks")

    def __init__(
        self, hooks: Sequence[Hook], approver: Approver | None, *, headless: bool = True
    ) -> None:
        self.pre_hooks: tuple[Hook, ...] = ()  # no hooks: no generators made (one per session)
        self.post_hooks: tuple[Hook, ...] = ()
        if hooks:
            self.pre_hooks = tuple(h for h in hooks if overrides(h, Hook, "pre_tool"))
            self.post_hooks = tuple(h for h in hooks if overrides(h, Hook, "post_tool"))
        self.approver = approver
        self.headless = headless

    async def veto(
        self, call: ToolCallPart, ctx: ToolContext, tool: Tool | None = None
    ) -> str | Asked | None:
        """The veto text of the first Block/Ask not approved, ``Asked``, or None to proceed.

        ``Asked``: the call is pending. ``tool``: the tool called, for its declarations.
        """
        denial = await self._hooks(call, ctx) if self.pre_hooks else None
        if denial is not None or tool is None:
            return denial
        if tool.external:
            return _invalid(call, ctx, tool) or Asked("external")
        if tool.requires_approval:
            problem = _invalid(call, ctx, tool)  # before the check reads the arguments too
            if problem is not None:
                return problem
            check = getattr(tool, "approval_check", None)  # a toolset's approval_required(fn)
            if check is None:  # through a journal's or a durable step's wrapper
                check = getattr(getattr(tool, "inner", None), "approval_check", None)
            if check is not None:
                try:
                    if not await check(ctx, call.arguments):
                        return None
                except Exception as exc:
                    return f"blocked: approval check failed: {type(exc).__name__}: {exc}"
            if self.approver is None:
                return Asked("approval")
            return await self._approve(self.approver, call, APPROVAL_TEXT.format(name=call.name))
        return None

    async def _hooks(self, call: ToolCallPart, ctx: ToolContext) -> str | Asked | None:
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
                if self.approver is None and self.headless:
                    return decision.message
                problem = _invalid(call, ctx)  # a person is asked next
                if problem is not None:
                    return problem
                if self.approver is None:
                    return Asked("approval", decision.message)
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
            if _is_async(approver):
                answer = approver(_copy(call), message)
            else:  # on a worker thread: an approver waiting on input() freezes no other run
                answer = await in_daemon_thread(approver, _copy(call), message)
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


def _invalid(call: ToolCallPart, ctx: ToolContext, tool: Tool | None = None) -> str | None:
    """The soft text of ``call``'s invalid arguments (None when they validate), before asking.

    ``tool``: the called tool when known; else the run's registry's (a hook's ``Ask`` about any
    tool). A name the registry lacks is the dispatch's to answer (``Tool not found``).
    """
    if tool is None:
        link = ctx._link
        if link is None:
            return None
        state, dispatcher = link
        registry = dispatcher.registry if state.registry is None else state.registry
        tool = registry.get(call.name)
        if tool is None:
            return None
    return _checked(tool, call.name, call.arguments)[0]


def _is_async(approver: object) -> bool:
    """Whether an approver is async (a coroutine function, or an object whose call is one)."""
    return inspect.iscoroutinefunction(approver) or inspect.iscoroutinefunction(
        getattr(approver, "__call__", None)  # noqa: B004
    )


def _copy(call: ToolCallPart) -> ToolCallPart:
    """The call with arguments of its own, for one gate (hooks and approvers are user code)."""
    return ToolCallPart(call.id, call.name, copy.deepcopy(dict(call.arguments)))
