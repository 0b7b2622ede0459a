"""Sync tools on daemon worker threads: ``in_daemon_thread`` awaits a function run there.

Not the loop's default executor: a sync tool that outlives its timeout (or never returns) is
abandoned and nothing waits for it at exit. A worker's ``BaseException`` (``GeneratorExit``
included) is carried through the future inside an ``Exception`` and raised again after the
await, so it reaches the tool pipeline as any panic does.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import queue

__all__ = ["in_daemon_thread"]


async def in_daemon_thread(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run a sync function on a daemon worker thread and await its result.

    Not the loop's default executor: a sync tool that outlives its timeout (or never returns)
    is abandoned, and nothing waits for it — not ``run_sync``, which shuts its loop's executor,
    and not the interpreter at exit. The thread runs on until the function returns (its result
    is dropped) and then serves other calls. Context variables are copied into the thread, as
    ``asyncio.to_thread`` does.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()
    context = contextvars.copy_context()

    def work() -> None:
        try:
            result = context.run(func, *args, **kwargs)
        except BaseException as exc:
            _settle(loop, future, None, exc if isinstance(exc, Exception) else _Carried(exc))
        else:
            _settle(loop, future, result, None)

    _WORKERS.submit(work)
    try:
        return await future
    except _Carried as carried:
        raise carried.raised from None


class _Carried(Exception):
    """A ``BaseException`` from a worker thread, carried through the future as an ``Exception``.

    A task that wakes on a future holding ``GeneratorExit`` throws it into its coroutine, and
    Python closes a coroutine thrown ``GeneratorExit`` whole, whatever its frames catch: the run
    would end there. Raised again after the await, it travels up like any exception.
    """

    def __init__(self, raised: BaseException) -> None:
        super().__init__(repr(raised))
        self.raised = raised


class _DaemonWorkers:
    """Daemon threads that take jobs from one queue; a new one starts when none is idle.

    The stdlib's ``ThreadPoolExecutor`` joins its (non-daemon) threads at interpreter exit,
    which would hang forever on a tool that never returns; this is the smallest pool that
    doesn't. Idle threads wait on the queue and cost nothing. The queue (and the ``queue``
    module) is made for the first job, not at import.
    """

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[Callable[[], None]] | None = None
        self._idle = 0
        self._lock = threading.Lock()

    def submit(self, job: Callable[[], None]) -> None:
        with self._lock:
            if self._jobs is None:
                import queue

                self._jobs = queue.SimpleQueue()
            jobs = self._jobs
            start = self._idle == 0
            if not start:
                self._idle -= 1
        jobs.put(job)
        if start:
            worker = threading.Thread(
                target=self._serve, args=(jobs,), name="agentloop-tool", daemon=True
            )
            worker.start()

    def _serve(self, jobs: queue.SimpleQueue[Callable[[], None]]) -> None:
        while True:
            jobs.get()()
            with self._lock:
                self._idle += 1


_WORKERS = _DaemonWorkers()


def _settle(
    loop: asyncio.AbstractEventLoop,
    future: asyncio.Future[Any],
    result: Any,
    error: BaseException | None,
) -> None:
    def settle() -> None:
        if future.done():  # the call timed out or was cancelled: nobody waits any more
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)

    try:
        loop.call_soon_threadsafe(settle)
    except RuntimeError:  # the loop is closed: the run ended long ago
        pass
