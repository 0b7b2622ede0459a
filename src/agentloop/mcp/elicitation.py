"""MCP elicitation answered in the process (SPEC 17): a server's question goes to a callback.

A server may ask the person behind the client for input in the middle of a tool call
(``elicitation/create`` in form mode: a message and a flat JSON Schema of the answer).
``MCPServer.stdio/http(..., elicitation=callback)`` answers it with the callback, given an
``ElicitationRequest`` (the server's name, its message, the schema). The answer is checked once,
here, where it leaves the process, and every doubt is a decline (fail closed)::

    the callback ...                              the server receives
    returns a mapping the schema accepts          accept, with that content
    returns None                                  decline
    raises, returns something not a mapping,      decline, logged at WARNING on the
      or a mapping the schema refuses               ``agentloop`` logger with the server's name
    is cancelled (the tool call timed out,        nothing more if the server withdrew its
      the run was cancelled, the server stopped)    question; else decline, once no tool call
                                                    of this server is in flight
    (there is no callback)                        decline; the client does not advertise
                                                  elicitation, as the SDK does without one
    (the server asks in URL mode)                 decline, logged: the callback answers forms
    (the server's schema cannot check anything)   decline, logged, and the callback not asked

A sync callback runs on a worker thread (as sync tools and approvers do), so one waiting on
``input()`` freezes no other run; the tool call's timeout still bounds it (a thread cannot be
stopped: on a timeout its eventual answer is dropped). The schema is checked with the same safe
validator as tool arguments: a ``$ref`` is never fetched and patterns run under a time limit.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import inspect
import logging
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Any, TypeAlias

import mcp.types as types
from mcp.client.session import ClientRequestContext
from pydantic import ValidationError

from agentloop._util.slots import record
from agentloop._util.threads import in_daemon_thread
from agentloop.mcp.arguments import Validator, argument_problems, safe_validator

__all__ = ["Elicitation", "ElicitationAnswer", "ElicitationRequest", "Elicitor"]

logger = logging.getLogger("agentloop")


@record
class ElicitationRequest:
    """A server's question for the user, as the ``elicitation=`` callback receives it.

    ``server`` is the ``MCPServer``'s name (as error texts say it), ``message`` the server's
    text for the person, ``schema`` the JSON Schema of the answer the server asked for: an
    object of flat properties (strings, numbers, booleans, enums).
    """

    server: str
    message: str
    schema: Mapping[str, Any]


ElicitationAnswer: TypeAlias = Mapping[str, str | int | float | bool | list[str] | None]
"""An accepted answer: the values of the requested schema's properties by name."""

Elicitation: TypeAlias = Callable[
    [ElicitationRequest], ElicitationAnswer | Awaitable[ElicitationAnswer | None] | None
]
"""The ``elicitation=`` callback: sync or async, the answer or None to decline."""

_DECLINE = types.ElicitResult(action="decline")


class Elicitor:
    """The SDK's ``elicitation_callback`` for one server: asks the callback, checks the answer."""

    def __init__(self, server: str, callback: Elicitation | None) -> None:
        self.server = server
        self.callback = callback
        self._calls = 0  # tool calls in flight on this connection
        self._asking: set[asyncio.Task[object]] = set()

    @contextlib.contextmanager
    def during_call(self) -> Iterator[None]:
        """Mark a tool call in flight; when none is left, no question is worth an answer.

        A server that withdraws its question when its call is cancelled (the SDK's servers
        do) cancels the callback itself; for one that does not, the end of the last call in
        flight does, so a timed-out call never leaves a callback waiting.
        """
        self._calls += 1
        try:
            yield
        finally:
            self._calls -= 1
            if self._calls == 0:
                for task in list(self._asking):
                    task.cancel()

    @property
    def advertised(self) -> bool:
        """Whether the client tells the server it can answer (only with a callback)."""
        return self.callback is not None

    async def __call__(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        """The answer the server receives (a decline unless everything checks out)."""
        callback = self.callback
        if callback is None:
            logger.info("tool server %r asked for input; declined (no elicitation=)", self.server)
            return _DECLINE
        if not isinstance(params, types.ElicitRequestFormParams):
            self._warn("it asked in URL mode, and the elicitation callback answers forms only")
            return _DECLINE
        schema = dict(params.requested_schema)
        validator = safe_validator(schema)  # checked before a person is asked in vain
        if isinstance(validator, str):
            self._warn(f"no answer could be checked: {validator}")
            return _DECLINE
        request = ElicitationRequest(self.server, params.message, copy.deepcopy(schema))
        try:
            answer = await self._ask(callback, request)
        except _Withdrawn:
            logger.info("tool server %r asked for input; withdrawn: no call waits", self.server)
            return _DECLINE
        except Exception:
            self._warn("the elicitation callback raised", exc_info=True)
            return _DECLINE
        if answer is None:
            return _DECLINE
        return self._accepted(answer, validator)

    async def _ask(self, callback: Elicitation, request: ElicitationRequest) -> object:
        """The callback's answer, in a task ``during_call`` can cancel (then ``_Withdrawn``)."""
        asking = asyncio.ensure_future(_answer(callback, request))
        self._asking.add(asking)
        asking.add_done_callback(self._asking.discard)
        try:
            return await asking  # cancelling us (the server withdrew) cancels it too
        except asyncio.CancelledError:
            if _cancelled_from_outside():
                raise
            raise _Withdrawn from None

    def _accepted(self, answer: object, validator: Validator) -> types.ElicitResult:
        """Accept with the answer if it is a mapping the schema accepts, else decline."""
        if not isinstance(answer, Mapping):
            self._warn(f"the elicitation callback returned a {type(answer).__name__}, not a dict")
            return _DECLINE
        content = dict(answer)
        problems = argument_problems(validator, content)
        if problems:
            self._warn(f"the elicitation answer does not fit the schema: {problems}")
            return _DECLINE
        try:
            return types.ElicitResult(action="accept", content=content)
        except ValidationError as exc:  # the schema allowed what the protocol does not carry
            why = "; ".join(str(error["msg"]) for error in exc.errors())
            self._warn(f"the elicitation answer cannot be sent: {why}")
            return _DECLINE

    def _warn(self, why: str, *, exc_info: bool = False) -> None:
        logger.warning(
            "tool server %r asked for input; declined: %s", self.server, why, exc_info=exc_info
        )


class _Withdrawn(Exception):
    """The question was cancelled because no tool call of the server is in flight any more."""


async def _answer(callback: Elicitation, request: ElicitationRequest) -> object:
    """Call the callback: an async one here, a sync one on a worker thread."""
    if _is_async(callback):
        answer: object = callback(request)
    else:  # on a worker thread: a callback waiting on input() freezes no other run
        answer = await in_daemon_thread(callback, request)
    if inspect.isawaitable(answer):
        answer = await answer
    return answer


def _cancelled_from_outside() -> bool:
    """Whether the running task itself is being cancelled (not only the task it awaited)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _is_async(callback: object) -> bool:
    """Whether a callback is async (a coroutine function, or an object whose call is one)."""
    return inspect.iscoroutinefunction(callback) or inspect.iscoroutinefunction(
        getattr(callback, "__call__", None)  # noqa: B004
    )
