"""Anthropic's memory tool (``memory_20250818``) served over a ``Memory``'s store (SPEC 27).

On Claude the three memory tools are replaced on the wire by ``{"type": "memory_20250818",
"name": "memory"}`` (beta header ``context-management-2025-06-27``; source:
https://platform.claude.com/en/docs/agents-and-tools/tool-use/memory-tool and the Messages API's
``BetaMemoryTool20250818``). Claude is trained to use it as a directory of files under
``/memories``; here a file ``/memories/<p>`` is the item whose id is ``/memories/<p>``, in the
run's namespace only, and a directory is a path prefix. ``view /memories`` lists every item of the
namespace (an item saved with another id shows as ``/memories/<id>``).

Paths are confined before anything is read or written: one not under ``/memories`` is ``Path must
start with /memories, got: <path>``; a ``..`` or ``.`` segment, ``//``, a backslash or NUL is
``Path <path> would escape /memories directory``. Writes are staged like ``remember``'s; a file
over ``max_item_chars`` is ``File <path> would be <n> characters; the limit is <max>``. Replies
use the tool's documented words.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentloop.errors import ToolError
from agentloop.memory._item import MemoryItem
from agentloop.memory._run import MemoryRun
from agentloop.memory._store import Write
from agentloop.memory._tools import SECRET_TEXT, MemoryTool, has_secret
from agentloop.tools import ToolContext

__all__ = ["BETA", "NATIVE_KEY", "ROOT", "TOOL_TYPE", "AnthropicMemoryTool", "confined"]

ROOT = "/memories"
TOOL_TYPE = "memory_20250818"
BETA = "context-management-2025-06-27"
NATIVE_KEY = "x-anthropic-tool"
"""The key of a tool's parameters that tells the Anthropic adapter to send the native tool."""

_COMMANDS = ("view", "create", "str_replace", "insert", "delete", "rename")


def confined(path: object) -> str:
    """``path`` when it is safely under ``/memories``; else the tool's soft refusal."""
    if not isinstance(path, str):
        raise ToolError(f"Path must start with /memories, got: {path!r}")
    if "\\" in path or "\x00" in path or "//" in path:
        raise ToolError(f"Path {path} would escape /memories directory")
    if path != ROOT and not path.startswith(ROOT + "/"):
        raise ToolError(f"Path must start with /memories, got: {path}")
    segments = path[len(ROOT) :].strip("/").split("/")
    if any(s in (".", "..") for s in segments):
        raise ToolError(f"Path {path} would escape /memories directory")
    return path.rstrip("/") or ROOT


def _missing(path: str) -> ToolError:
    return ToolError(f"The path {path} does not exist. Please provide a valid path.")


def _shown(item_id: str) -> str:
    """An item's path in a listing (an id that is no path shows under ``/memories``)."""
    return item_id if item_id.startswith(ROOT + "/") else f"{ROOT}/{item_id}"


class AnthropicMemoryTool(MemoryTool):
    """The ``memory`` tool Claude calls: view, create, str_replace, insert, delete, rename."""

    name = "memory"
    description = "Anthropic's memory tool: files under /memories kept across conversations."
    parameters: Mapping[str, Any] = {
        "type": "object",
        "properties": {"command": {"type": "string", "enum": list(_COMMANDS)}},
        "required": ["command"],
        NATIVE_KEY: {"type": TOOL_TYPE, "name": "memory", "beta": BETA},
    }

    def validate(self, arguments: Mapping[str, Any]) -> Mapping[str, Any]:
        """A known command (its own fields are checked as it runs)."""
        if arguments.get("command") not in _COMMANDS:
            raise ToolError(
                f"Error: Unknown command {arguments.get('command')!r}; use one of "
                f"{', '.join(_COMMANDS)}"
            )
        return arguments

    async def run(self, arguments: Mapping[str, Any], ctx: ToolContext, mem: MemoryRun) -> str:
        """Run one command over the run's memory."""
        command = arguments["command"]
        if command == "rename":
            return await self._rename(arguments, ctx, mem)
        path = confined(arguments.get("path"))
        if command == "view":
            return await self._view(path, mem, arguments.get("view_range"))
        if command == "create":
            return await self._create(path, _text(arguments, "file_text"), ctx, mem)
        if command == "delete":
            return await self._delete(path, ctx, mem)
        item = await self._file(path, mem)
        if command == "str_replace":
            return await self._replace(item, path, arguments, ctx, mem)
        return await self._insert(item, path, arguments, ctx, mem)

    async def _file(self, path: str, mem: MemoryRun) -> MemoryItem:
        found = await _find(path, mem)
        if found is None:
            raise _missing(path)
        return found

    async def _view(self, path: str, mem: MemoryRun, shown: object = None) -> str:
        item = await _find(path, mem) if path != ROOT else None
        if item is not None:
            lines = list(enumerate(item.text.split("\n"), 1))
            first, last = _range(shown, len(lines))
            numbered = "\n".join(f"{n:6}\t{line}" for n, line in lines[first - 1 : last])
            return f"Here's the content of {path} with line numbers:\n{numbered}"
        shown = [_shown(i) for i in await mem.ids()]
        inside = [p for p in shown if path == ROOT or p.startswith(path + "/")]
        if path != ROOT and not inside:
            raise _missing(path)
        listing = "\n".join(f"- {p}" for p in sorted(inside))
        return f"Here're the files and directories in {path}:\n{listing}".rstrip(":\n")

    async def _check(self, path: str, text: str, mem: MemoryRun, new: bool) -> None:
        limit = self.memory.max_item_chars
        if len(text) > limit:
            raise ToolError(f"File {path} would be {len(text)} characters; the limit is {limit}")
        if has_secret(text, path) if new else has_secret(text):  # a new path: a new id, listed
            raise ToolError(SECRET_TEXT)  # by every later view (the app's own ids are trusted)
        if new and await mem.count() >= self.memory.max_items:
            raise ToolError(f"memory is full: {self.memory.max_items} items; forget some first")

    async def _create(self, path: str, text: str, ctx: ToolContext, mem: MemoryRun) -> str:
        if path == ROOT or await _find(path, mem) is not None:
            raise ToolError(f"Error: File {path} already exists")
        await self._check(path, text, mem, new=True)
        mem.stage(ctx.turn, Write(path, text))
        return f"File created successfully at: {path}"

    async def _replace(
        self,
        item: MemoryItem,
        path: str,
        arguments: Mapping[str, Any],
        ctx: ToolContext,
        mem: MemoryRun,
    ) -> str:
        old, new = _text(arguments, "old_str"), _text(arguments, "new_str")
        count = item.text.count(old) if old else 0
        if count != 1:
            if count > 1:
                raise ToolError(
                    f"No replacement was performed. Multiple occurrences of old_str `{old}` in "
                    f"{path}. Please ensure it is unique."
                )
            raise ToolError(
                f"No replacement was performed, old_str `{old}` did not appear verbatim in {path}."
            )
        text = item.text.replace(old, new, 1)
        await self._check(path, text, mem, new=False)
        mem.stage(ctx.turn, Write(item.id, text, item.tags))
        return "The memory file has been edited."

    async def _insert(
        self,
        item: MemoryItem,
        path: str,
        arguments: Mapping[str, Any],
        ctx: ToolContext,
        mem: MemoryRun,
    ) -> str:
        lines = item.text.split("\n")
        at, added = arguments.get("insert_line"), _text(arguments, "insert_text")
        if isinstance(at, bool) or not isinstance(at, int) or not 0 <= at <= len(lines):
            raise ToolError(
                f"Error: Invalid `insert_line` parameter: {at}. It should be within the range "
                f"of lines of the file: [0, {len(lines)}]"
            )
        text = "\n".join([*lines[:at], *added.split("\n"), *lines[at:]])
        await self._check(path, text, mem, new=False)
        mem.stage(ctx.turn, Write(item.id, text, item.tags))
        return f"The file {path} has been edited."

    async def _delete(self, path: str, ctx: ToolContext, mem: MemoryRun) -> str:
        item = await _find(path, mem) if path != ROOT else None
        targets = [item.id] if item is not None else []
        if item is None:
            targets = [i for i in await mem.ids() if _shown(i).startswith(path + "/")]
        if not targets:
            raise _missing(path)
        for target in targets:
            mem.stage(ctx.turn, Write(target))
        return f"Successfully deleted {path}"

    async def _rename(self, arguments: Mapping[str, Any], ctx: ToolContext, mem: MemoryRun) -> str:
        old, new = confined(arguments.get("old_path")), confined(arguments.get("new_path"))
        item = await self._file(old, mem)
        if new == ROOT or await _find(new, mem) is not None:
            raise ToolError(f"Error: The destination {new} already exists")
        if has_secret(new):
            raise ToolError(SECRET_TEXT)
        kept = item.created_at.timestamp()
        mem.stage(ctx.turn, Write(new, item.text, item.tags, kept))
        mem.stage(ctx.turn, Write(item.id))
        return f"Successfully renamed {old} to {new}"


async def _find(path: str, mem: MemoryRun) -> MemoryItem | None:
    """The item at ``path``: its id, or a non-path id shown as ``/memories/<id>``."""
    found = await mem.get(path)
    if found is None and path.startswith(ROOT + "/"):
        rest = path[len(ROOT) + 1 :]
        if "/" not in rest:
            found = await mem.get(rest)
    return found


def _range(shown: object, lines: int) -> tuple[int, int]:
    """A ``view_range`` ``[from, to]`` (1-based, ``to`` -1 for the end) as line bounds."""
    if shown is None:
        return 1, lines
    if (
        not isinstance(shown, list | tuple)
        or len(shown) != 2
        or not all(isinstance(n, int) and not isinstance(n, bool) for n in shown)
    ):
        raise ToolError(f"Error: `view_range` must be [from, to], got {shown!r}")
    first, last = shown
    last = lines if last == -1 else last
    if not 1 <= first <= max(1, lines) or not first <= last <= lines:
        raise ToolError(f"Error: Invalid `view_range`: {list(shown)}. Lines run from 1 to {lines}")
    return first, last


def _text(arguments: Mapping[str, Any], field: str) -> str:
    value = arguments.get(field)
    if not isinstance(value, str):
        raise ToolError(f"Error: `{field}` must be a string, got {value!r}")
    return value
