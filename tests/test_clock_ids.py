"""The system clock's ids: version 4 UUIDs' hex digits, unique across batches, threads and forks.

``Clock.new_id`` takes ids from a batch made from one ``os.urandom`` read; these tests hold it to
what ``uuid.uuid4().hex`` promises.
"""

from __future__ import annotations

import os
import re
import sys
import threading
import uuid
import warnings

import pytest

from agentloop.clock import SYSTEM_CLOCK

_UUID4_HEX = re.compile(r"[0-9a-f]{12}4[0-9a-f]{3}[89ab][0-9a-f]{15}")


def test_ids_are_uuid4_hex_and_unique_across_batches() -> None:
    ids = [SYSTEM_CLOCK.new_id() for _ in range(2000)]  # several batches of 256
    assert len(set(ids)) == len(ids)
    assert all(_UUID4_HEX.fullmatch(i) for i in ids)
    assert all(uuid.UUID(i).version == 4 and uuid.UUID(i).hex == i for i in ids)


def test_threads_never_share_an_id() -> None:
    taken: list[list[str]] = [[] for _ in range(4)]

    def take(into: list[str]) -> None:
        into.extend(SYSTEM_CLOCK.new_id() for _ in range(3000))

    threads = [threading.Thread(target=take, args=(t,)) for t in taken]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    every = [i for t in taken for i in t]
    assert len(set(every)) == len(every) == 12000


@pytest.mark.skipif(sys.platform == "win32" or not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_never_takes_its_parents_ids() -> None:
    SYSTEM_CLOCK.new_id()  # the parent holds a batch
    read, write = os.pipe()
    with warnings.catch_warnings():  # 3.12+ warns on a fork while other threads live
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.write(write, " ".join(SYSTEM_CLOCK.new_id() for _ in range(3)).encode())
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    with os.fdopen(read) as pipe:
        child = set(pipe.read().split())
    assert len(child) == 3
    assert not child & {SYSTEM_CLOCK.new_id() for _ in range(3)}
