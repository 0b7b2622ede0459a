"""Tool-call deadlines on one timer per event loop: ``asyncio.timeout``'s rules, at less cost.

``asyncio.timeout`` schedules a timer per use and cancels it on the way out; on a tool turn that
was about a fifth of the dispatch (the ``Timeout`` object, its two coroutines, the timer handle,
its heap push among the cancelled handles of earlier calls, the cancel). A tool call's default
deadline is 120 s and a call usually ends in microseconds, so here each event loop has one
``_Watch`` with at most one live timer, armed for the earliest deadline it watches: a call adds
its ``Deadline`` and takes it away again, and the timer is only moved when a new deadline comes
earlier than the one it is armed for. When it fires, every deadline that is due is expired (its
task cancelled, as ``asyncio.timeout`` does) and the timer is armed again for the next one.

What a ``Deadline`` does is ``asyncio.timeout``'s, rule for rule: it expires by cancelling its
task; ``finish`` uncancels the task once when it expired, and the call timed out only when the
exception is that ``CancelledError`` and nobody else asked to cancel the task meanwhile (a cancel
of the run still wins, and is never turned into a timeout).
"""

from __future__ import annotations

import asyncio
import math
import weakref

__all__ = ["Deadline"]


class _Watch:
    """The deadlines of one event loop, and its one timer."""

    __slots__ = ("__weakref__", "armed", "handle", "loop", "pending")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.pending: set[Deadline] = set()
        self.armed = math.inf
        """The loop time the timer fires at (``inf``: no live timer)."""
        self.handle: asyncio.TimerHandle | None = None

    def arm(self, when: float) -> None:
        """Move the timer to ``when`` (a deadline earlier than the one it is armed for)."""
        if self.handle is not None:
            self.handle.cancel()
        self.armed = when
        self.handle = self.loop.call_at(when, self._fire)

    def _fire(self) -> None:
        """Expire every deadline that is due; arm the timer for the next one."""
        due = max(self.armed, self.loop.time())  # the loop ran the timer: its time has come
        self.handle, self.armed = None, math.inf
        following = math.inf
        for deadline in list(self.pending):
            if deadline.when <= due:
                self.pending.discard(deadline)
                deadline.expired = True
                deadline.task.cancel()
            elif deadline.when < following:
                following = deadline.when
        if following < math.inf:
            self.arm(following)


_WATCHES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Watch] = weakref.WeakKeyDictionary()
_last: _Watch | None = None
"""The watch used last: a process runs its calls on one loop, so this is nearly always it."""


def _watch(loop: asyncio.AbstractEventLoop) -> _Watch:
    global _last
    watch = _last
    if watch is None or watch.loop is not loop:
        watch = _WATCHES.get(loop)
        if watch is None:
            watch = _WATCHES[loop] = _Watch(loop)
        _last = watch
    return watch


class Deadline:
    """The current task is cancelled ``seconds`` from now, unless ``finish`` comes first.

    Raises ``RuntimeError`` outside a task, as ``asyncio.timeout`` does.
    """

    __slots__ = ("cancelling", "expired", "task", "watch", "when")

    def __init__(self, seconds: float) -> None:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task(loop)
        if task is None:
            raise RuntimeError("Timeout should be used inside a task")
        self.task = task
        self.cancelling = task.cancelling()
        self.expired = False
        """The deadline passed and the task was cancelled for it."""
        self.when = when = loop.time() + seconds
        watch = _last
        if watch is None or watch.loop is not loop:
            watch = _watch(loop)
        self.watch = watch
        watch.pending.add(self)  # the timer moves only for a deadline before the one armed
        if when < watch.armed:
            watch.arm(when)

    def finish(self, error: BaseException | None) -> bool:
        """Stop watching; whether ``error`` (what the call raised, if anything) is the timeout.

        As ``asyncio.timeout``'s exit: an expired deadline uncancels its task once, and the
        call timed out only when ``error`` is a ``CancelledError`` and no other cancel is
        pending on the task.
        """
        if not self.expired:
            self.watch.pending.discard(self)
            return False
        return self.task.uncancel() <= self.cancelling and type(error) is asyncio.CancelledError
