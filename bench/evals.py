"""Goals of SPEC 23: 1,000 eval cases on a ``FunctionModel`` agent in under 5 s, and a 1 MiB
image in a request adding under 200 bytes to a cassette.

The evaluation is the whole path a user takes: ``Dataset.evaluate(agent)`` runs each case as a
real run of the agent (one tool call, then the answer: two turns), collects its runs, and
applies five evaluators (``EqualsExpected``, ``Contains``, ``ToolCalled``, ``Trajectory``,
``MaxTurns``). The cassette size is the file a recording writes for a request with a 1 MiB PNG
(stored as ``<media sha256:... BYTES>``) minus the one for the same request without it. Run:
``.venv/bin/python bench/evals.py``. A benchmark, not a test: it prints its figures and says
whether each goal holds (exit 1 if one does not).
"""

from __future__ import annotations

import asyncio
import base64
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from agentloop import Agent, ModelRequest, tool
from agentloop.evals import (
    Case,
    Contains,
    Dataset,
    EqualsExpected,
    MaxTurns,
    ToolCalled,
    Trajectory,
)
from agentloop.messages import ToolResultPart
from agentloop.testing import FunctionModel, call

CASES = 1_000
IMAGE = 1 << 20


@tool
def lookup(city: str) -> str:
    """Look up the weather in a city."""
    return f"sunny in {city}"


def model(request: ModelRequest) -> Any:
    last = request.messages[-1]
    if last.role == "user":
        return call("lookup", {"city": last.text})
    result = last.parts[0]
    assert isinstance(result, ToolResultPart)
    return f"It is {result.content}."


def evaluation_seconds() -> tuple[float, float]:
    agent = Agent(FunctionModel(model), tools=[lookup])
    dataset = Dataset(
        cases=[
            Case(inputs=f"city {i}", expected_output=f"It is sunny in city {i}.")
            for i in range(CASES)
        ],
        evaluators=[
            EqualsExpected(),
            Contains("sunny"),
            ToolCalled("lookup"),
            Trajectory(["lookup"]),
            MaxTurns(2),
        ],
    )
    started = time.perf_counter()
    report = asyncio.run(dataset.evaluate(agent))
    elapsed = time.perf_counter() - started
    assert report.pass_rate == 1.0, report.cases[0]
    return elapsed, report.pass_rate


def cassette_bytes() -> int:
    from agentloop.cassettes._format import request_record, save

    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * (IMAGE // 256)
    data_url = "data:image/png;base64," + base64.b64encode(png).decode()
    text = {"type": "text", "text": "What is in this picture?"}
    image = {"type": "image_url", "image_url": {"url": data_url}}

    def size(content: list[Any], folder: Path) -> int:
        body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": content}]}
        response = {"status": 200, "headers": {}, "body": {"choices": []}}
        request = request_record("POST", "https://api/v1/chat/completions", body, ())
        path = folder / f"{len(content)}.yaml"
        save(path, [{"request": request, "response": response}])
        return path.stat().st_size

    with tempfile.TemporaryDirectory() as tmp:
        return size([text, image], Path(tmp)) - size([text], Path(tmp))


def main() -> int:
    seconds, _ = evaluation_seconds()
    added = cassette_bytes()
    ok_time, ok_size = seconds < 5.0, added < 200
    print(f"{CASES} cases on a FunctionModel agent: {seconds:.2f} s (goal < 5 s) "
          f"{'ok' if ok_time else 'MISSED'}")  # fmt: skip
    print(f"a {IMAGE:,}-byte image adds {added} bytes to a cassette (goal < 200) "
          f"{'ok' if ok_size else 'MISSED'}")  # fmt: skip
    return 0 if ok_time and ok_size else 1


if __name__ == "__main__":
    sys.exit(main())
