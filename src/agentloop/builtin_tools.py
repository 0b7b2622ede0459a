"""Read-only built-in tools confined to one directory: ``read_file`` and ``list_dir``.

A path with ``..``, an absolute path, or a symlink that leaves the root is a soft
``ToolError`` naming the rule; nothing outside the root is ever read.
"""

from __future__ import annotations

from pathlib import Path, PurePath

from agentloop.errors import ToolError
from agentloop.tools import FunctionTool, tool

__all__ = ["resolve_inside", "workspace_tools"]

_MAX_READ_CHARS = 100_000


def resolve_inside(root: Path, path: str) -> Path:
    """Resolve ``path`` under ``root``; raise ``ToolError`` when a rule forbids it."""
    pure = PurePath(path)
    if pure.is_absolute():
        raise ToolError(f"path '{path}' is absolute; use a path relative to the working directory")
    if ".." in pure.parts:
        raise ToolError(
            f"path '{path}' contains '..'; paths must stay inside the working directory"
        )
    base = root.resolve()
    target = (base / pure).resolve()
    if target != base and base not in target.parents:
        raise ToolError(f"path '{path}' leaves the working directory through a symlink")
    return target


def workspace_tools(root: Path | str = ".") -> list[FunctionTool]:
    """``read_file`` and ``list_dir`` over ``root``."""
    base = Path(root)

    @tool
    def read_file(path: str) -> str:
        """Read a UTF-8 text file inside the working directory.

        Args:
            path: File path relative to the working directory.
        """
        target = resolve_inside(base, path)
        if not target.is_file():
            names = (
                sorted(p.name for p in target.parent.iterdir()) if target.parent.is_dir() else []
            )
            hint = f" Files in that directory: {', '.join(names[:20])}" if names else ""
            raise ToolError(f"file {path} not found.{hint}")
        text = target.read_text(encoding="utf-8", errors="replace")
        return text[:_MAX_READ_CHARS]

    @tool
    def list_dir(path: str = ".") -> str:
        """List a directory inside the working directory (directories end with '/').

        Args:
            path: Directory path relative to the working directory.
        """
        target = resolve_inside(base, path)
        if not target.is_dir():
            raise ToolError(f"directory {path} not found")
        entries = sorted(p.name + ("/" if p.is_dir() else "") for p in target.iterdir())
        return "\n".join(entries) or "(empty)"

    return [read_file, list_dir]
