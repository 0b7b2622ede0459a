"""``record``: a frozen, slotted dataclass that costs less to define and to build.

``@dataclass(frozen=True, slots=True)`` compiles six functions per class (``__init__``,
``__repr__``, ``__eq__``, ``__hash__``, ``__setattr__``, ``__delattr__``), one ``exec`` each:
about 0.6 ms a class, most of what importing agentloop cost. ``record`` asks ``dataclass`` for
the fields and the slots only (``init``, ``repr`` and ``eq`` off, not frozen) and installs the
rest itself: ``__init__`` from a code compiled once per shape of fields, ``==`` and ``hash``
compiled once per field count on their first call, closures for the others. What a frozen
dataclass offers stays: ``fields()``, ``replace()``, ``is_dataclass()``, ``__match_args__``,
``FrozenInstanceError`` on assignment, its ``repr``, ``==`` and ``hash``, pickling and copying
(the same state as a frozen slotted dataclass), and ``__dataclass_params__`` says
``frozen=True``, so a plain frozen dataclass may subclass a record.

The ``__init__`` sets each slot through its descriptor instead of ``object.__setattr__`` (about
0.4 us for five fields instead of 1.3 us): records such as ``Message`` and ``StreamEvent`` are
built on the engine's hot path. A method the class body defines itself is never replaced.
``fast_init`` gives an already made frozen, slotted dataclass that faster ``__init__`` alone.
"""

from __future__ import annotations

import builtins
import dataclasses
import inspect
import sys
import types
from _thread import get_ident
from collections.abc import Callable
from typing import Any, TypeVar, dataclass_transform, overload

__all__ = ["fast_init", "record"]

_T = TypeVar("_T")


class _Factory:
    """The default of a parameter whose field has a ``default_factory`` (as in ``dataclasses``)."""

    def __repr__(self) -> str:
        return "<factory>"


_HAS_FACTORY = _Factory()


@overload
def record(cls: type[_T], /) -> type[_T]: ...
@overload
def record(
    *,
    repr: bool = True,
    eq: bool = True,
    frozen: bool = True,
    kw_only: bool = False,
    match_args: bool = True,
) -> Callable[[type[_T]], type[_T]]: ...
@dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field, dataclasses.Field))
def record(
    cls: type[_T] | None = None,
    /,
    *,
    repr: bool = True,
    eq: bool = True,
    frozen: bool = True,
    kw_only: bool = False,
    match_args: bool = True,
) -> type[_T] | Callable[[type[_T]], type[_T]]:
    """``@dataclass(frozen=True, slots=True, ...)`` for what it takes, built more cheaply.

    ``frozen=False`` gives ``@dataclass(slots=True, ...)``: no ``__setattr__`` of its own, and
    ``__hash__`` None when it compares (``eq``) and the class defines no hash.
    """

    def wrap(cls: type[_T]) -> type[_T]:
        options = {"repr": repr, "eq": eq, "frozen": frozen}
        return _make(cls, options, kw_only=kw_only, match_args=match_args)

    return wrap if cls is None else wrap(cls)


def _make(cls: type[_T], options: dict[str, bool], *, kw_only: bool, match_args: bool) -> type[_T]:
    """The record of ``cls``; ``options`` are its ``repr``, ``eq`` and ``frozen``."""
    body = set(cls.__dict__)
    has_doc = cls.__dict__.get("__doc__") is not None
    frozen_base = options["frozen"] and _frozen_base(cls, body)
    if not has_doc:
        cls.__doc__ = "-"  # spares dataclass a signature it would get wrong; set below
    # A frozen base makes dataclass refuse frozen=False; it then compiles two more functions.
    made: Any = dataclasses.dataclass(
        cls,
        init=False,
        repr=False,
        eq=False,
        frozen=frozen_base,
        match_args=match_args,
        kw_only=kw_only,
        slots=True,
    )
    params = made.__dataclass_params__
    params.init = True
    params.repr, params.eq, params.frozen = options["repr"], options["eq"], options["frozen"]
    fields = dataclasses.fields(made)
    for name, function in _methods(made, fields, body, **options).items():
        if name in body:
            continue
        if function is not None and function is not _getstate and function is not _setstate:
            function.__qualname__ = f"{made.__qualname__}.{name}"
            function.__module__ = made.__module__
        setattr(made, name, function)
    if not has_doc:
        made.__doc__ = made.__name__ + str(inspect.signature(made)).replace(" -> None", "")
    return made  # type: ignore[no-any-return]


def _frozen_base(cls: type, body: set[str]) -> bool:
    """Whether a base is a frozen dataclass; the ``TypeError`` a frozen dataclass would raise."""
    bases = [p for b in cls.__mro__[1:] if (p := getattr(b, "__dataclass_params__", None))]
    frozen_base = any(p.frozen for p in bases)
    if bases and not frozen_base:
        raise TypeError("cannot inherit frozen dataclass from a non-frozen one")
    for name in ("__setattr__", "__delattr__"):
        if name in body:
            raise TypeError(f"Cannot overwrite attribute {name} in class {cls.__name__}")
    return frozen_base


def _methods(
    made: type,
    fields: tuple[dataclasses.Field[Any], ...],
    body: set[str],
    *,
    repr: bool,
    eq: bool,
    frozen: bool,
) -> dict[str, Callable[..., Any] | None]:
    """What a slotted dataclass with these options has; ``body`` may lose ``__hash__``."""
    own: dict[str, Callable[..., Any] | None] = {
        "__init__": _init(made, fields, frozen=frozen),
    }
    if frozen:
        own["__setattr__"] = _setattr(made, fields)
        own["__delattr__"] = _delattr(made, fields)
        own["__getstate__"] = _getstate
        own["__setstate__"] = _setstate
    if repr:
        own["__repr__"] = _repr(tuple(f.name for f in fields if f.repr))
    if eq:
        compared = [f.name for f in fields if f.compare]
        own["__eq__"] = _on_first_call(made, "__eq__", lambda: _eq(made, compared))
        hashed = made.__dict__.get("__hash__", dataclasses.MISSING)
        if hashed is dataclasses.MISSING or (hashed is None and "__eq__" in body):
            hashing = [f.name for f in fields if (f.compare if f.hash is None else f.hash)]
            made_hash = _on_first_call(made, "__hash__", lambda: _hash(made, hashing))
            own["__hash__"] = made_hash if frozen else None
            body.discard("__hash__")
    return own


_COMPILED: dict[str, types.CodeType] = {}
"""The code of each source compiled so far (one per shape of record, see ``_function``)."""


def _function(
    made: type,
    source: str,
    helpers: dict[str, Any],
    attributes: list[str],
    parameters: list[str] | None = None,
) -> Any:
    """The function ``source`` defines, as a method of ``made``.

    The source names no field: it reads and sets ``_field0``, ``_field1``, ... and takes
    ``a0``, ``a1``, ... as parameters, so records of one shape share one compiled code
    (``_COMPILED``); each gets a copy with those names replaced by ``attributes`` and
    ``parameters`` (a compile costs about 80 us, a copy 2 us). ``helpers`` are the values the
    code reads by name, given to it as closure cells; its globals are the module's, as the
    dataclass's are (``typing.get_type_hints`` reads the annotations there).
    """
    code = _COMPILED.get(source)
    if code is None:
        outer = f"def __make__({', '.join(helpers)}):\n    " + source.replace("\n", "\n    ")
        found: dict[str, Any] = {}
        exec(outer, {}, found)
        inner = [c for c in found["__make__"].__code__.co_consts if isinstance(c, types.CodeType)]
        code = _COMPILED[source] = inner[0]
    real = {f"_field{i}": name for i, name in enumerate(attributes)}
    names = tuple(real.get(name, name) for name in code.co_names)
    varnames = code.co_varnames
    if parameters is not None:
        varnames = ("__record_self__" if "self" in parameters else "self", *parameters)
    qualname = f"{made.__qualname__}.{code.co_name}"
    code = code.replace(co_names=names, co_varnames=varnames, co_qualname=qualname)
    module = sys.modules.get(made.__module__)
    scope = vars(module) if module is not None else {"__builtins__": builtins}
    cells = tuple(types.CellType(helpers[name]) for name in code.co_freevars)
    return types.FunctionType(code, scope, code.co_name, None, cells)


def _init(made: type, fields: tuple[dataclasses.Field[Any], ...], *, frozen: bool) -> Any:
    """The ``__init__``: a frozen record's sets each slot through its descriptor.

    A frozen dataclass's goes through ``object.__setattr__`` (about 1.3 us for five fields; the
    descriptors take 0.4 us). Names and default values are not in the code: they are its
    parameter names and the function's defaults.
    """
    scope: dict[str, Any] = {"_HAS_FACTORY": _HAS_FACTORY}
    params: list[str] = []
    keywords: list[str] = []
    defaults: list[Any] = []
    keyword_defaults: dict[str, Any] = {}
    lines: list[str] = []
    for i, f in enumerate(fields):
        set_ = f"_s{i}(self, {{}})" if frozen else f"self._field{i} = {{}}"
        if frozen:
            scope[f"_s{i}"] = _setter(made, f.name)
        default = f.default
        if f.default_factory is not dataclasses.MISSING:
            scope[f"_f{i}"], default = f.default_factory, _HAS_FACTORY
        if not f.init:
            lines += _unset(i, default, scope, set_)
            continue
        factory = default is _HAS_FACTORY
        lines.append(
            set_.format(f"_f{i}() if a{i} is _HAS_FACTORY else a{i}" if factory else f"a{i}")
        )
        if f.kw_only:
            keywords.append(f"a{i}")
            if default is not dataclasses.MISSING:
                keyword_defaults[f.name] = default
        elif default is not dataclasses.MISSING:
            params.append(f"a{i}")
            defaults.append(default)
        elif defaults:
            raise TypeError(f"non-default argument {f.name!r} follows default argument")
        else:
            params.append(f"a{i}")
    if hasattr(made, "__post_init__"):
        lines.append("self.__post_init__()")
    signature = ", ".join(["self", *params, *(["*", *keywords] if keywords else [])])
    source = f"def __init__({signature}):\n    " + ("\n    ".join(lines) or "pass")
    names = [f.name for f in fields if f.init and not f.kw_only]
    names += [f.name for f in fields if f.init and f.kw_only]
    init = _function(made, source, scope, [f.name for f in fields], names)
    init.__defaults__ = tuple(defaults) or None
    init.__kwdefaults__ = keyword_defaults or None
    init.__annotations__ = {f.name: f.type for f in fields if f.init} | {"return": None}
    return init


def _unset(i: int, default: Any, scope: dict[str, Any], set_: str) -> list[str]:
    """The line (if any) that sets field ``i``, which ``__init__`` takes no parameter for."""
    if default is _HAS_FACTORY:
        return [set_.format(f"_f{i}()")]
    if default is dataclasses.MISSING:
        return []
    scope[f"_d{i}"] = default
    return [set_.format(f"_d{i}")]


def _setter(made: type, name: str) -> Callable[[Any, Any], None]:
    """What sets field ``name`` of a frozen ``made``: its slot's ``__set__`` when it has one."""
    slot = getattr(made, name, None)
    if type(slot) is types.MemberDescriptorType:
        return slot.__set__
    return lambda self, value: object.__setattr__(self, name, value)


def _setattr(made: Any, fields: tuple[dataclasses.Field[Any], ...]) -> Callable[..., None]:
    names = frozenset(f.name for f in fields)

    def __setattr__(self: Any, name: str, value: Any) -> None:
        if type(self) is made or name in names:
            raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")
        super(made, self).__setattr__(name, value)

    return __setattr__


def _delattr(made: Any, fields: tuple[dataclasses.Field[Any], ...]) -> Callable[..., None]:
    names = frozenset(f.name for f in fields)

    def __delattr__(self: Any, name: str) -> None:
        if type(self) is made or name in names:
            raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")
        super(made, self).__delattr__(name)

    return __delattr__


def _getstate(self: Any) -> list[Any]:
    """The state a frozen, slotted dataclass pickles: its fields' values, in order."""
    return [getattr(self, f.name) for f in dataclasses.fields(self)]


def _setstate(self: Any, state: list[Any]) -> None:
    for f, value in zip(dataclasses.fields(self), state, strict=False):
        object.__setattr__(self, f.name, value)


def _repr(names: tuple[str, ...]) -> Callable[[Any], str]:
    running: set[tuple[int, int]] = set()

    def __repr__(self: Any) -> str:
        key = id(self), get_ident()
        if key in running:
            return "..."
        running.add(key)
        try:
            shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in names)
        finally:
            running.discard(key)
        return f"{self.__class__.__qualname__}({shown})"

    return __repr__


def _on_first_call(made: type, name: str, build: Callable[[], Any]) -> Callable[..., Any]:
    """A method that builds the real one on its first call, puts it in its place and calls it.

    ``==`` and ``hash`` are compiled as the dataclass writes them (a closure over the field
    names is half as fast), but most records are never compared: they compile when first used.
    """

    def first(self: Any, *args: Any) -> Any:
        method = build()
        setattr(made, name, method)
        return method(self, *args)

    return first


def _fields_tuple(who: str, count: int) -> str:
    """``(who._field0,who._field1,)``: the tuple a dataclass compares and hashes."""
    return "(" + "".join(f"{who}._field{i}," for i in range(count)) + ")"


def _eq(made: type, names: list[str]) -> Any:
    mine, theirs = _fields_tuple("self", len(names)), _fields_tuple("other", len(names))
    source = (
        "def __eq__(self, other):\n"
        "    if other.__class__ is self.__class__:\n"
        f"        return {mine} == {theirs}\n"
        "    return NotImplemented"
    )
    return _function(made, source, {}, names)


def _hash(made: type, names: list[str]) -> Any:
    source = f"def __hash__(self):\n    return hash({_fields_tuple('self', len(names))})"
    return _function(made, source, {}, names)


def fast_init(made: type[_T]) -> type[_T]:
    """``made`` (a frozen, slotted dataclass) with the fast ``__init__`` of a ``record``."""
    fields = dataclasses.fields(made)  # type: ignore[arg-type]
    made.__init__ = _init(made, fields, frozen=True)  # type: ignore[method-assign]
    return made
