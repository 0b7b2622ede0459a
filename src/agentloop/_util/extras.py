"""Optional extras: a face that needs one says which ``pip install`` brings it.

``import agentloop.ui.ag_ui`` without Starlette used to end in Python's own
``ModuleNotFoundError: No module named 'starlette'``, which names a package the user never
chose. ``require_extra`` checks the packages an extra installs before anything imports them and
raises ``MissingExtra``, a ``ModuleNotFoundError`` (so ``except ImportError`` still catches it)
whose message is the command that fixes it: ``pip install 'agentloop[ui]'``. It finds the
packages without importing them (``importlib.util.find_spec``): the check costs microseconds.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence

__all__ = ["MissingExtra", "require_extra"]


class MissingExtra(ModuleNotFoundError):
    """A package of an optional extra is not installed; ``extra`` names the extra."""

    def __init__(self, message: str, *, extra: str, name: str) -> None:
        super().__init__(message, name=name)
        self.extra = extra


def require_extra(extra: str, packages: Sequence[str], what: str) -> None:
    """Raise ``MissingExtra`` unless every top-level package in ``packages`` can be imported.

    ``what`` is the thing that needs them, as the message names it (``"agentloop.ui"``).
    """
    missing = [name for name in packages if not _findable(name)]
    if missing:
        raise MissingExtra(
            f"{what} needs the {extra!r} extra ({', '.join(missing)} not installed): "
            f"pip install 'agentloop[{extra}]'",
            extra=extra,
            name=missing[0],
        )


def _findable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # a blocked import, or a module without a spec
        return False
