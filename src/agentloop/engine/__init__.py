"""The engine: ``Agent`` and the private rooms of a run.

``agent`` is the face an application holds and ``session`` a conversation on it (both
re-exported here); every other module here is private (no stability
promise): ``loop`` drives a run, ``turn`` makes one model call, ``dispatch``/``call``/``invoke``/
``gates`` run tool calls, ``state``/``compaction``/``limits``/``guards`` keep a run's state and
safety, ``resume``/``journal`` continue a stored run, ``stream`` and ``agent_tool`` are two
faces of a run. ``docs/architecture.md`` draws the layers.
"""

from typing import TYPE_CHECKING

from agentloop._util.lazy import lazy_exports
from agentloop.engine.agent import Agent

if TYPE_CHECKING:
    from agentloop.engine.session import Session

__getattr__, __dir__ = lazy_exports(  # a session's room loads with the first session
    "agentloop.engine", {"Session": "agentloop.engine.session"}, globals()
)

__all__ = ["Agent", "Session"]
