"""Lazy exports for a package: one module ``__getattr__`` and ``__dir__`` (PEP 562).

``agentloop`` and ``agentloop.providers`` name classes whose modules are costly to import
(asyncio, pydantic, the vendor adapters). Each package lists where its lazy names live and binds
the pair this returns; a name's module is imported on its first access, and the value is then
stored in the package's namespace so later accesses are plain attribute lookups. For mypy the
package imports the same names under ``TYPE_CHECKING`` and lists them in ``__all__``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, exports: Mapping[str, str], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``, whose globals are ``namespace``.

    ``exports`` maps each lazy name to the module that defines it. ``__getattr__`` raises the
    usual ``AttributeError`` for any other name; ``__dir__`` lists the loaded and the lazy names.
    """

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *exports})

    return __getattr__, __dir__
