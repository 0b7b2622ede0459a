"""Lazy exports for a package: one module ``__getattr__`` and ``__dir__`` (PEP 562).

``agentloop`` and ``agentloop.providers`` name classes whose modules are costly to import
(asyncio, pydantic, the vendor adapters). Each package lists where its lazy names live and binds
the pair this returns; a name's module is imported on its first access, and the value is then
stored in the package's namespace so later accesses are plain attribute lookups. For mypy the
package imports the same names under ``TYPE_CHECKING`` and lists them in ``__all__``.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

__all__ = ["lazy_exports", "lazy_module"]


def lazy_exports(
    package: str, exports: Mapping[str, str], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``, whose globals are ``namespace``.

    ``exports`` maps each lazy name to the module that defines it. A public submodule's name
    imports it, as an eager package would have; any other name raises the usual
    ``AttributeError``. ``__dir__`` lists the public names only: the package's ``__all__``, its
    lazy names and the public submodules loaded so far (no ``TYPE_CHECKING``, no helpers).
    """

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is not None:
            value = getattr(importlib.import_module(module), name)
        elif not name.startswith("_") and (found := _submodule(f"{package}.{name}")) is not None:
            value = found  # ``import agentloop; agentloop.errors`` worked when it loaded eagerly
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        modules = {
            n for n, v in namespace.items() if isinstance(v, ModuleType) and not n.startswith("_")
        }
        return sorted({*namespace.get("__all__", ()), *exports, *modules})

    return __getattr__, __dir__


def _submodule(name: str) -> ModuleType | None:
    """The module ``name`` imported, or None when there is no such module.

    A submodule that exists but cannot be imported (an optional extra is missing) is an
    ``AttributeError`` naming the cause, so that ``hasattr`` and ``getattr(..., default)`` still
    answer instead of raising; ``import`` of the submodule shows the ``ImportError`` itself.
    """
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name == name:
            return None
        raise AttributeError(f"{name} cannot be imported: {exc}") from exc
    except ImportError as exc:
        raise AttributeError(f"{name} cannot be imported: {exc}") from exc


def lazy_module(name: str) -> ModuleType:
    """The module ``name``, executed on its first attribute access (``importlib.util.LazyLoader``).

    For a module the engine needs only once something happens (the event classes, built only
    while somebody listens): ``Agent(...)`` and ``from agentloop import Agent`` do not pay for
    defining them. Already imported, it is the module itself.
    """
    found = sys.modules.get(name)
    if found is not None:
        return found
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError(f"no module named {name!r}", name=name)
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    return module
