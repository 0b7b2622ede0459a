"""The checked, encoded parts of a Chat Completions body that depend on the agent, kept per client.

Every request of a run, and of every run on the sessions of one agent, has the same *shape*: the
same model names, ``ModelSettings`` and ``OutputSpec`` objects, tools, system prompt and mode.
Such a request was checked (``ChatRules.check``) and encoded when its shape was first seen; its
body differs only by its messages. ``Shapes`` keeps, per shape, the body's head, what follows the
messages, the media the model takes and whether a reply may need ``restore_optional``, so a
request of a known shape costs its new messages only.

Runs in flight at once interleave their requests, so more than the last shape is kept (at most
``SHAPE_LIMIT``; all are dropped when it is reached). The session id, which each run has its own
of, is read by one field only, ``prompt_cache_key``: it is not part of the key. Where the key is
sent, the kept tail is cut around its value and each request writes its own session's there.

The key holds the settings' and output's ``id()``: the kept shape holds the objects themselves, so
no other object can take their ids while it is kept, and a hit checks them with ``is`` too. Both
are frozen records; a request with other settings or another output object is a new shape, one
with other tools (compared by ``==``, by identity first) replaces the shape, whose parts are then
checked and encoded again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentloop.model import ModelRequest, ModelSettings, OutputSpec, ToolSpec
from agentloop.providers.openai._chat_request import prompt_cache_key

__all__ = ["SHAPE_LIMIT", "Shape", "Shapes"]

SHAPE_LIMIT = 32
"""Shapes one client keeps at most (agents that share a client, each with its own settings)."""

_KEY_FIELD = '"prompt_cache_key": '


class Shape:
    """A request shape's checked parts: the body's head and tail, media and restores."""

    __slots__ = (
        "after", "before", "head", "media", "output", "restores", "session", "settings", "tools"
    )  # fmt: skip

    def __init__(
        self,
        request: ModelRequest,
        head: str,
        tail: str,
        media: frozenset[str],
        restores: bool,
        cache_key: bool,
    ) -> None:
        self.settings: ModelSettings = request.settings
        self.output: OutputSpec | None = request.output
        self.tools: Sequence[ToolSpec] = request.tools
        self.head = head
        self.media = media
        self.restores = restores
        self.before = tail
        self.after: str | None = None  # past the session's key, when the tail is cut there
        self.session: str | None = None  # the session the tail was made for, if it names one
        session = request.session_id
        if cache_key and session and request.settings.cache:
            written = f"{_KEY_FIELD}{_quoted_key(session)}"
            if tail.count(written) == 1:  # cut around it (an extra_body may have replaced it)
                cut = tail.index(written)
                self.before, self.after = tail[:cut], tail[cut + len(written) :]
            else:
                self.session = session

    def tail(self, session_id: str | None) -> str:
        """What follows the messages in the body of a request of ``session_id``."""
        if self.after is None:
            return self.before
        return f"{self.before}{_KEY_FIELD}{_quoted_key(session_id or '')}{self.after}"


def _quoted_key(session_id: str) -> str:
    return f'"{prompt_cache_key(session_id)}"'  # "agentloop-" and hex digits: nothing to escape


class Shapes:
    """The shapes one client has seen, found again by the request's objects (``find``)."""

    def __init__(self) -> None:
        self._shapes: dict[tuple[Any, ...], Shape] = {}

    def find(self, request: ModelRequest, model: str, stream: bool) -> Shape | None:
        """The kept shape of ``request`` (sent to ``model``), or None: check and encode it."""
        settings, output = request.settings, request.output
        shape = self._shapes.get(  # ``_key``, written out: this runs on every request
            (id(settings), id(output), model, request.model, request.system, stream,
             not request.session_id)
        )  # fmt: skip
        if (
            shape is None
            or shape.settings is not settings
            or shape.output is not output
            or request.provider_tools
        ):
            return None
        if shape.tools != request.tools:
            return None
        if shape.session is not None and shape.session != request.session_id:
            return None
        return shape

    def keep(self, request: ModelRequest, model: str, stream: bool, shape: Shape) -> None:
        """Keep ``shape`` for requests shaped as ``request`` (one without provider tools)."""
        if len(self._shapes) >= SHAPE_LIMIT:
            self._shapes.clear()
        self._shapes[_key(request, model, stream)] = shape


def _key(request: ModelRequest, model: str, stream: bool) -> tuple[Any, ...]:
    """What a shape is found by: the objects and names its parts depend on, but its tools."""
    return (
        id(request.settings), id(request.output), model, request.model, request.system, stream,
        not request.session_id,  # whether a prompt_cache_key may be sent
    )  # fmt: skip
