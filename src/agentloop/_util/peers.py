"""Keyword mistakes named: a call with a keyword the function does not take says what to write.

People arrive with another library's words in their fingers (``message_history=`` where we say
``history=``). Python's own ``TypeError`` names the keyword and nothing more. ``hinting(advice)``
wraps a function so that such a call raises a ``TypeError`` that also says what to write: the
advice for a word the table knows, else the closest keyword the function takes. ``hint_init``
does the same for a class's ``__init__`` (a dataclass's generated one included), and
``no_attribute`` makes the ``AttributeError`` for a peer's attribute looked up on one of ours.

Nothing is paid until a call fails: the wrapper is one frame, the signature is read only on a
failed call, and a ``TypeError`` raised inside the function's body passes through untouched
(only a call that never entered the function, a binding error, is explained).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar, cast

from agentloop._util.suggest import suggest

__all__ = ["RUN_WORDS", "explain", "hint_init", "hinting", "no_attribute"]

F = TypeVar("F", bound=Callable[..., Any])
C = TypeVar("C", bound=type)

_NAMED = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
_CLOSE = 0.6
"""How alike a mistyped keyword must be to one the function takes to be suggested."""

_OUTPUT = "use run.output (the output_type's value, else the final reply's text)"
_HISTORY = "use run.conversation (the whole transcript: pass it as history= next time)"

RUN_WORDS: Mapping[str, str] = {
    "final_output": _OUTPUT,
    "data": _OUTPUT,
    "result": _OUTPUT,
    "all_messages": _HISTORY,
    "to_input_list": _HISTORY,
    "new_messages": "use run.messages (the messages this run added)",
}
"""What pydantic-ai's and the OpenAI Agents SDK's run results call a ``Run``'s fields (here, as
``agentloop.run`` sits beneath the engine; the agent's own words are in ``engine.peers``)."""


def hinting(advice: Mapping[str, str]) -> Callable[[F], F]:
    """Wrap a function: an unknown keyword is a ``TypeError`` naming what to write instead.

    ``advice`` maps a word other libraries use to ours (``"message_history": "use history="``).
    """

    def decorate(func: F) -> F:
        @functools.wraps(func)
        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return func(*args, **kwargs)
            except TypeError as error:
                tb = error.__traceback__
                if kwargs and tb is not None and tb.tb_next is None:  # never entered ``func``
                    message = explain(func, kwargs, advice)
                    if message is not None:
                        raise TypeError(message) from None
                raise
            except BaseException:
                del args, kwargs  # what is raised keeps this frame, not what it was called with
                raise

        if inspect.iscoroutinefunction(func) and hasattr(inspect, "markcoroutinefunction"):
            inspect.markcoroutinefunction(call)  # Python 3.12+: still reads as ``async def``
        return cast(F, call)

    return decorate


def hint_init(advice: Mapping[str, str]) -> Callable[[C], C]:
    """A class decorator: ``hinting(advice)`` on the class's ``__init__``."""

    def decorate(cls: C) -> C:
        init = hinting(advice)(vars(cls)["__init__"])
        type.__setattr__(cls, "__init__", init)
        return cls

    return decorate


def explain(
    func: Callable[..., Any], kwargs: Mapping[str, Any], advice: Mapping[str, str]
) -> str | None:
    """The message for the first keyword in ``kwargs`` that ``func`` does not take (else None)."""
    try:
        parameters = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return None
    takes = [p.name for p in parameters if p.kind in _NAMED and p.name != "self"]
    name = next((k for k in kwargs if k not in takes), None)
    if name is None:
        return None
    where = func.__qualname__.removesuffix(".__init__")
    message = f"{where}() got an unexpected keyword argument {name!r}"
    tip = advice.get(name)
    if tip is None:
        close = suggest(name, takes, _CLOSE)
        tip = f"did you mean {close}=?" if close else f"it takes {', '.join(takes) or 'none'}"
    return f"{message}: {tip}"


def no_attribute(
    owner: object, name: str, ours: Iterable[str], advice: Mapping[str, str]
) -> AttributeError:
    """The ``AttributeError`` for ``owner.name``: ``advice``'s word for a peer's, or a close one.

    ``ours`` are the public names ``owner`` has (a private name gets the plain message).
    """
    message = f"{type(owner).__name__!r} object has no attribute {name!r}"
    tip = advice.get(name)
    if tip is None and not name.startswith("_"):
        close = suggest(name, ours, _CLOSE)
        tip = f"did you mean {close!r}?" if close else None
    return AttributeError(f"{message}: {tip}" if tip else message, name=name, obj=owner)
