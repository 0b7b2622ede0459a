"""Objects named ``MODULE:NAME`` on the command line: ``--tools``, ``--agent`` and ``--deps``.

A module is imported as uvicorn imports an app (the working directory on the path), so a
project's own ``tools.py`` next to where the command runs is found. A missing module or name is
a ``ConfigurationError`` (exit 2) naming the flag. ``--deps`` names a factory ``(run) -> deps``
(``agentloop continue`` and ``agentloop ui`` give it to ``continue_run(deps=...)``).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from agentloop.errors import ConfigurationError

__all__ = ["deps_factory", "named_object", "tools_named"]

_DEPS_FORM = "MODULE:CALLABLE, a function (run) -> deps such as myapp.deps:make"


def named_object(spec: str, flag: str) -> object:
    """What ``MODULE:NAME`` names (``ConfigurationError`` naming ``flag`` when nothing)."""
    module_name, _, name = spec.partition(":")
    if not module_name or not name:
        raise ConfigurationError(f"{flag} takes MODULE:NAME, got {spec!r}", field=flag[2:])
    if "" not in sys.path:
        sys.path.insert(0, "")
    try:
        return getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError) as exc:
        raise ConfigurationError(f"{flag} {spec}: {exc}", field=flag[2:]) from exc


def tools_named(specs: Sequence[str] | None) -> list[Any]:
    """The read-only workspace tools, then each ``--tools MODULE:NAME`` (a tool or a list)."""
    from agentloop.builtin_tools import workspace_tools

    tools: list[Any] = list(workspace_tools(Path.cwd()))
    for spec in specs or ():
        found = named_object(spec, "--tools")
        tools.extend(found if isinstance(found, list | tuple) else [found])
    return tools


def deps_factory(spec: str, form: str = "") -> Callable[[Any], Any]:
    """The deps factory ``--deps MODULE:CALLABLE`` names (``ConfigurationError`` naming the fix).

    ``form``: what the factory takes, for the errors (default: a run's, ``(run) -> deps``).
    """
    form = form or _DEPS_FORM
    module_name, _, name = spec.partition(":")
    if not module_name or not name:
        raise ConfigurationError(f"--deps takes {form}; got {spec!r}", field="deps")
    try:
        found = named_object(spec, "--deps")
    except ConfigurationError as exc:
        hint = "run from the directory that holds the module, or put it on PYTHONPATH"
        raise ConfigurationError(f"{exc.message} ({hint})", field="deps") from exc
    if not callable(found):
        raise ConfigurationError(
            f"--deps {spec} names a {type(found).__name__}, not a callable: give {form}",
            field="deps",
        )
    return found
