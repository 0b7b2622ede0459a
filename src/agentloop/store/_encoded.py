"""Each message and turn of a run in flight encoded once, for every row that holds it.

A run's turn rows (``save_turn``) hold its turns and messages as JSON; its finalize
(``finish_runs``) writes them again: in the run record (``Run.to_dict``) and, for its committed
messages, as history rows. JSON is most of what a store write costs in Python, so ``RunTexts``
keeps the text each turn row was written with and the finalize reuses it:

- a message by its identity (a ``Message`` is immutable, as the providers' wire caches assume);
- a turn by its identity and its ``to_dict()`` (a ``Turn`` may still change after its row, e.g.
  a budget warning noted on it: its text is reused only when its data is still the same).

A journaled model reply (``t<turn>/reply``) holds the ``Message`` itself: its text is made
here once, for the step and for the turn's row after it.

The record is then the run's other fields encoded, with the turns and messages spliced in: the
same JSON value as ``to_json(run.to_dict())`` (its keys in another order). The texts of a run
live from its first turn row to its finalize (or the session's next run start).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from agentloop.messages import Message
from agentloop.run import Run, Turn
from agentloop.store._rows import to_json

__all__ = ["RunTexts", "message_texts", "record_json", "step_json"]


class RunTexts:
    """The JSON of one run's messages and turns, as its turn rows were written."""

    __slots__ = ("messages", "session_id", "turns")

    def __init__(self, session_id: str | None) -> None:
        self.session_id = session_id
        self.messages: dict[int, tuple[Message, str]] = {}
        self.turns: dict[int, tuple[Turn, dict[str, Any], str]] = {}

    def message(self, message: Message) -> str:
        """``message`` as JSON, encoded on its first use."""
        found = self.messages.get(id(message))
        if found is not None and found[0] is message:
            return found[1]
        text = to_json(message.to_dict())
        self.messages[id(message)] = (message, text)
        return text

    def turn(self, turn: Turn) -> str:
        """``turn`` as JSON: the text it was written with while its data is the same."""
        data = turn.to_dict()
        found = self.turns.get(id(turn))
        if found is not None and found[0] is turn and found[1] == data:
            return found[2]
        text = to_json(data)
        self.turns[id(turn)] = (turn, data, text)
        return text


def message_texts(messages: Sequence[Message], texts: Sequence[RunTexts]) -> list[str]:
    """Each message as JSON: the text a turn row already holds, else encoded now."""
    known: dict[int, tuple[Message, str]] = {}
    for run in texts:
        known.update(run.messages)
    out = []
    for message in messages:
        found = known.get(id(message))
        out.append(found[1] if found is not None and found[0] is message else _json(message))
    return out


def _json(message: Message) -> str:
    return to_json(message.to_dict())


def record_json(run: Run[Any], texts: RunTexts | None) -> str:
    """``to_json(run.to_dict())``, the turns and messages a turn row holds reused."""
    if texts is None:
        return to_json(run.to_dict())
    data = dataclasses.replace(run, turns=[], messages=[]).to_dict()
    del data["turns"], data["messages"]
    head = to_json(data)[:-1]
    turns = ",".join(texts.turn(t) for t in run.turns)
    messages = ",".join(texts.message(m) for m in run.messages)
    comma = "," if data else ""
    return f'{head}{comma}"turns":[{turns}],"messages":[{messages}]}}'


def step_json(value: Mapping[str, Any], texts: RunTexts | None) -> str:
    """A journal step's value as JSON; a reply's ``Message`` by the run's text of it."""
    message = value.get("message")
    if not isinstance(message, Message):
        return to_json(value)
    text = texts.message(message) if texts is not None else _json(message)
    rest = {k: v for k, v in value.items() if k != "message"}
    return f'{{"message":{text},{to_json(rest)[1:]}' if rest else f'{{"message":{text}}}'
