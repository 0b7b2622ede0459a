"""The tools the model gets over memory: ``remember``, ``recall``, ``forget`` (SPEC 27).

None takes a namespace: each works in its run's (``Memory.runs[ctx.run_id]``). Writes are
staged (``agentloop.memory._run``), never written while the run runs. The soft texts are exact:

- ``remember(text, tags=[])`` → ``remembered as <id>``; ``memory too large: <n> characters
  (limit <max>)``; ``memory not saved: it contains a secret`` (the text or a tag is something the
  one redactor, ``redact_secrets``, would change); ``memory is full: <max> items; forget some
  first`` (staged writes count);
- ``recall(query, k=5)`` → one ``[<id>] <text>`` line per item, or ``no memories match
  '<query>'``;
- ``forget(id)`` → ``forgot <id>``, or ``no memory with id '<id>'``;
- a store failure: ``memory unavailable: <ExcType>``, a sick failure for the tool breaker.

An id ``remember`` makes is derived from the run and the call id, so a replayed call (a
durable worker re-running its turn) stages the same write under the same id.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from agentloop.errors import ToolError
from agentloop.memory._item import MAX_K
from agentloop.memory._store import Write
from agentloop.tools import Tool, ToolContext

if TYPE_CHECKING:
    from agentloop.memory._run import Limits, MemoryRun

__all__ = ["ForgetTool", "MemoryTool", "RecallTool", "RememberTool", "has_secret", "item_id"]

SECRET_TEXT = "memory not saved: it contains a secret"


def has_secret(*texts: str) -> bool:
    """Whether the one redactor would change any of ``texts``."""
    from agentloop.safety.redact import redact_secrets

    return any(redact_secrets(t) != t for t in texts)


def item_id(ctx: ToolContext) -> str:
    """The id of the item a call writes: the same for the same run and call."""
    raw = f"{ctx.run_id}\x00{ctx.call_id}".encode("utf-8", "surrogatepass")
    return "m" + hashlib.blake2b(raw, digest_size=8).hexdigest()


def _invalid(tool: str, field: str, problem: str) -> ToolError:
    return ToolError(f"Invalid arguments for tool '{tool}': {field}: {problem}")


class MemoryTool(Tool):
    """A tool over its run's memory: finds the run's state, maps store failures to soft text."""

    journaled = False
    """Never replayed from a journal: a replayed turn runs it again, staging the same write
    (its id derives from the call), since a staged write lives in the run, not the store."""

    def __init__(self, memory: Limits) -> None:
        self.memory = memory

    def state(self, ctx: ToolContext) -> MemoryRun:
        """The run's memory (staged writes over the store)."""
        found = self.memory.runs.get(ctx.run_id)
        if found is None:
            raise ToolError("memory unavailable: no memory for this run", sick=True)
        return found

    async def call(self, arguments: Mapping[str, Any], ctx: ToolContext) -> Any:
        """Run the command; a store failure is ``memory unavailable: <ExcType>`` (sick)."""
        try:
            return await self.run(arguments, ctx, self.state(ctx))
        except ToolError:
            raise
        except Exception as exc:  # the store failed: the tool is sick, the run goes on
            raise ToolError(f"memory unavailable: {type(exc).__name__}", sick=True) from exc

    async def run(self, arguments: Mapping[str, Any], ctx: ToolContext, mem: MemoryRun) -> Any:
        """The command itself."""
        raise NotImplementedError


class RememberTool(MemoryTool):
    """``remember(text, tags=[])``: save a fact for later conversations."""

    name = "remember"
    description = (
        "Save a fact worth keeping for later conversations with this user (a preference, a "
        "decision, a detail they asked you to remember). Returns the memory's id."
    )
    parameters: Mapping[str, Any] = {
        "type": "object",
        "properties": {
            "text": {"type": "string", "description": "The fact, in one or two sentences."},
            "tags": {"type": "array", "items": {"type": "string"}, "default": []},
        },
        "required": ["text"],
    }

    def validate(self, arguments: Mapping[str, Any]) -> Mapping[str, Any]:
        """``text`` a non-empty string, ``tags`` a list of strings."""
        text = arguments.get("text")
        if not isinstance(text, str) or not text.strip():
            raise _invalid(self.name, "text", "must be a non-empty string")
        tags = arguments.get("tags", [])
        if not isinstance(tags, list) or not all(isinstance(t, str) and t for t in tags):
            raise _invalid(self.name, "tags", "must be a list of non-empty strings")
        return {"text": text, "tags": tags}

    async def run(self, arguments: Mapping[str, Any], ctx: ToolContext, mem: MemoryRun) -> str:
        """Stage the fact; the soft refusals say why not."""
        text, tags = arguments["text"], list(arguments["tags"])
        limit = self.memory.max_item_chars
        if len(text) > limit:
            raise ToolError(f"memory too large: {len(text)} characters (limit {limit})")
        if has_secret(text, *tags):
            raise ToolError(SECRET_TEXT)
        full = self.memory.max_items
        if await mem.count() >= full:
            raise ToolError(f"memory is full: {full} items; forget some first")
        new = item_id(ctx)
        mem.stage(ctx.turn, Write(new, text, tuple(dict.fromkeys(tags))))
        return f"remembered as {new}"


class RecallTool(MemoryTool):
    """``recall(query, k=5)``: search saved facts."""

    name = "recall"
    description = (
        "Search facts saved in earlier conversations with this user; plain words, any of "
        "which may match. Returns one '[<id>] <text>' line per memory."
    )
    parameters: Mapping[str, Any] = {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "Words to look for."},
            "k": {"type": "integer", "minimum": 1, "maximum": MAX_K, "default": 5},
        },
        "required": ["query"],
    }

    def validate(self, arguments: Mapping[str, Any]) -> Mapping[str, Any]:
        """``query`` a string, ``k`` an int in 1..100."""
        query = arguments.get("query")
        if not isinstance(query, str):
            raise _invalid(self.name, "query", "must be a string")
        k = arguments.get("k", 5)
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
            raise _invalid(self.name, "k", f"must be an integer from 1 to {MAX_K}")
        return {"query": query, "k": k}

    async def run(self, arguments: Mapping[str, Any], ctx: ToolContext, mem: MemoryRun) -> str:
        """The matching memories, one line each."""
        query = arguments["query"]
        items = await mem.search(query, arguments["k"])
        if not items:
            return f"no memories match '{query}'"
        return "\n".join(f"[{i.id}] {i.text}" for i in items)


class ForgetTool(MemoryTool):
    """``forget(id)``: delete a saved fact."""

    name = "forget"
    description = "Delete a saved fact by its id (as recall shows it: [<id>])."
    parameters: Mapping[str, Any] = {
        "type": "object",
        "properties": {"id": {"type": "string"}},
        "required": ["id"],
    }

    def validate(self, arguments: Mapping[str, Any]) -> Mapping[str, Any]:
        """``id`` a non-empty string."""
        found = arguments.get("id")
        if not isinstance(found, str) or not found:
            raise _invalid(self.name, "id", "must be a non-empty string")
        return {"id": found}

    async def run(self, arguments: Mapping[str, Any], ctx: ToolContext, mem: MemoryRun) -> str:
        """Stage the deletion, or say there is no such memory."""
        target = arguments["id"]
        if await mem.get(target) is None:
            raise ToolError(f"no memory with id '{target}'")
        mem.stage(ctx.turn, Write(target))
        return f"forgot {target}"
