"""``SkillSet``: skill folders found and checked at construction, three tools to read and run them.

A skill is a folder holding ``SKILL.md``: YAML front matter between ``---`` lines (``name``: 1-64
of ``[a-z0-9-]``, no leading, trailing or double hyphen, the folder's own name; ``description``:
1-1024 characters), then the body. Every path a tool is given is resolved (symlinks included)
and must stay inside the skill's folder; anything else is soft text for the model.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentloop._util.slots import record
from agentloop._util.suggest import suggest
from agentloop._util.threads import in_daemon_thread
from agentloop.errors import ConfigurationError, ToolError
from agentloop.tools import FunctionTool, Tool, ToolContext
from agentloop.toolsets import AbstractToolset, Entry, Scope

__all__ = ["Skill", "SkillSet"]

_NAME = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")
MAX_FILES = 50
HEADER = "Skills (call load_skill to read one):"


@record
class Skill:
    """One skill: its name, description, folder and body (the text after the front matter)."""

    name: str
    description: str
    path: Path
    body: str


def _fail(path: Path, why: str) -> ConfigurationError:
    return ConfigurationError(f"skill file {str(path)!r}: {why}", field="skills")


def parse(path: Path) -> Skill:
    """The skill whose ``SKILL.md`` is ``path``; ``ConfigurationError`` naming it if malformed."""
    import yaml  # the skills extra

    text = path.read_text(encoding="utf-8")
    match = re.match(r"---\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|$)", text, re.DOTALL)
    if match is None:
        raise _fail(path, "it must begin with YAML front matter between '---' lines")
    try:
        meta = yaml.safe_load(match.group(1))
    except yaml.YAMLError as exc:
        raise _fail(path, f"its front matter is not valid YAML: {exc}") from None
    if not isinstance(meta, dict):
        raise _fail(path, "its front matter must be a mapping with name and description")
    name, description = meta.get("name"), meta.get("description")
    if not isinstance(name, str) or len(name) > 64 or _NAME.fullmatch(name) is None:
        raise _fail(
            path,
            f"name {name!r} must be 1-64 characters of a-z, 0-9 and '-' (no leading, "
            "trailing or double hyphen)",
        )
    if name != path.parent.name:
        raise _fail(path, f"name {name!r} must be its folder's name, {path.parent.name!r}")
    if not isinstance(description, str) or not 1 <= len(description.strip()) <= 1024:
        raise _fail(path, "description must be 1-1024 characters")
    return Skill(name, description.strip(), path.parent, text[match.end() :].strip())


def find(paths: tuple[str | Path, ...]) -> dict[str, Skill]:
    """Every skill under ``paths`` (a skill folder, or a folder of them), by name."""
    found: dict[str, Skill] = {}
    for given in paths:
        root = Path(given)
        if not root.is_dir():
            raise ConfigurationError(f"skills path {str(root)!r} is not a folder", field="skills")
        files = [root / "SKILL.md"] if (root / "SKILL.md").is_file() else []
        files = files or sorted(
            p / "SKILL.md" for p in root.iterdir() if (p / "SKILL.md").is_file()
        )
        for file in files:
            skill = parse(file)
            if skill.name in found:
                raise _fail(file, f"two skills are named {skill.name!r}")
            found[skill.name] = skill
    return found


class SkillSet(AbstractToolset):
    """Skills as a toolset: ``load_skill``, ``read_skill_file`` and (with a runner) scripts."""

    def __init__(
        self,
        *paths: str | Path,
        runner: Callable[..., Any] | None = None,
        max_read_bytes: int = 262_144,
        name: str = "skills",
    ) -> None:
        if runner is not None and not callable(runner):
            raise ConfigurationError("SkillSet runner must be callable", field="runner")
        if (
            isinstance(max_read_bytes, bool)
            or not isinstance(max_read_bytes, int)
            or max_read_bytes < 1
        ):
            raise ConfigurationError("SkillSet max_read_bytes must be >= 1", field="max_read_bytes")
        self.name = name
        self.skills = find(paths)
        self.runner = runner
        self.max_read_bytes = max_read_bytes
        tools: list[Tool] = [FunctionTool(self._load_skill, name="load_skill")]
        tools.append(FunctionTool(self._read_skill_file, name="read_skill_file"))
        if runner is not None:
            tools.append(FunctionTool(self._run_skill_script, name="run_skill_script"))
        self._entries = [Entry.of(t, name) for t in tools]

    async def entries(self, scope: Scope) -> list[Entry]:
        """The two (or three) tools."""
        return self._entries

    def static_names(self) -> tuple[str, ...]:
        """The tools' names."""
        return tuple(e.spec.name for e in self._entries)

    def instructions(self) -> str | None:
        """The skills' names and descriptions (None without skills)."""
        if not self.skills:
            return None
        lines = [f"- {s.name}: {s.description}" for s in self.skills.values()]
        return "\n".join([HEADER, *lines])

    # -- the tools ---------------------------------------------------------------------------

    def _skill(self, name: str) -> Skill:
        skill = self.skills.get(name)
        if skill is not None:
            return skill
        text = f"no skill named '{name}'. Available: {', '.join(sorted(self.skills)) or 'none'}"
        hint = suggest(name, self.skills)
        raise ToolError(f"{text}. Did you mean '{hint}'?" if hint else text)

    def _load_skill(self, ctx: ToolContext, name: str) -> str:
        """Read a skill's instructions (and the names of its other files)."""
        skill = self._skill(name)
        link = getattr(ctx, "_link", None)  # the engine's (run state, dispatcher)
        if link is not None:
            link[0].run.skills_read.append(skill.name)
        files = sorted(
            p.relative_to(skill.path).as_posix()
            for p in skill.path.rglob("*")
            if p.is_file() and p != skill.path / "SKILL.md"
        )[:MAX_FILES]
        return f"{skill.body}\n\nfiles: {', '.join(files)}" if files else skill.body

    def _inside(self, skill: Skill, path: str) -> Path:
        """``path`` resolved inside the skill's folder, else soft text naming the problem."""
        root = skill.path.resolve()
        target = (root / path).resolve()
        if Path(path).is_absolute() or not target.is_relative_to(root):
            raise ToolError(f"'{path}' is outside skill '{skill.name}'")
        if not target.is_file():
            raise ToolError(f"skill '{skill.name}' has no file '{path}'")
        return target

    def _read_skill_file(self, skill: str, path: str) -> str:
        """Read a text file of a skill (a path relative to the skill's folder)."""
        found = self._skill(skill)
        target = self._inside(found, path)
        size = target.stat().st_size
        if size > self.max_read_bytes:
            raise ToolError(
                f"'{path}' is {size} bytes, more than the {self.max_read_bytes} this tool reads"
            )
        try:
            return target.read_bytes().decode("utf-8")
        except UnicodeDecodeError:
            raise ToolError(f"'{path}' is not a UTF-8 text file") from None

    async def _run_skill_script(self, skill: str, path: str, args: list[str] | None = None) -> Any:
        """Run a script of a skill (a path relative to the skill's folder) with arguments."""
        found = self._skill(skill)
        target = self._inside(found, path)
        runner = self.runner
        assert runner is not None
        arguments = list(args or [])
        if inspect.iscoroutinefunction(runner):
            return await runner(target, arguments, cwd=found.path.resolve())
        result = await in_daemon_thread(runner, target, arguments, cwd=found.path.resolve())
        return await result if inspect.isawaitable(result) else result
