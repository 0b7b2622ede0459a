"""Legitimate repetitive work must never look like a loop (the reference's "patterns that must
not flag").

Every workload runs with DEFAULT settings and a model that decides its next step from the last
tool result it read, as a real model would. Each must complete: no ``LoopDetected``, no breaker
refusal, the model's final answer reflects the work.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from agentloop import Agent, RunConfig, ToolError, tool
from agentloop.messages import ToolResultPart
from agentloop.model import ModelRequest
from agentloop.safety import Convergence
from agentloop.testing import FakeClock, FunctionModel, RecordingObserver, ScriptedCall, call, reply

BREAKER_TEXT = "tool temporarily unavailable: circuit breaker open"


def last_results(request: ModelRequest) -> list[ToolResultPart]:
    """The results of the previous turn (empty on the first request)."""
    last = request.messages[-1]
    return list(last.tool_results_parts) if last.role == "tool" else []


def last_text(request: ModelRequest) -> str | None:
    results = last_results(request)
    return results[-1].content if results else None


async def complete(
    decide: Callable[[ModelRequest], Any],
    tools: Sequence[Any],
    *,
    config: RunConfig | None = None,
    prompt: str = "go",
) -> tuple[str, list[str], RecordingObserver]:
    """Run to completion; return the output, every result text read, and the observer."""
    recorder = RecordingObserver()
    model = FunctionModel(decide)
    agent = Agent(model, tools=tools, config=config, observers=[recorder])
    run = await agent.run(prompt)
    assert run.stop_reason is None
    assert run.output is not None
    texts = [r.content for request in model.requests for r in last_results(request)]
    assert BREAKER_TEXT not in texts
    assert not any(t.startswith("dispatch refused") for t in texts)
    return run.output, texts, recorder


# ------------------------------------------------------------------ 1. polling a job


@pytest.mark.parametrize("streak", [1, 2, 3, 5, 9])
async def test_polling_a_job_whose_progress_changes_every_few_polls(streak: int) -> None:
    """30 polls of the same call; the percentage moves every ``streak`` polls (up to 9)."""
    polls = 0
    total = 30

    @tool
    def job_status(job_id: str) -> str:
        """Report a job's progress."""
        nonlocal polls
        polls += 1
        if polls >= total:
            return "done: 1,204 rows exported"
        percent = (polls - 1) // streak * 100 * streak // total
        return f"running: {percent}% complete"

    def decide(request: ModelRequest) -> Any:
        text = last_text(request)
        if text is not None and text.startswith("done"):
            return reply(f"The export finished ({text[6:]}).")
        return call("job_status", {"job_id": "exp-7"})

    output, texts, _ = await complete(decide, [job_status])
    assert polls == total
    assert output == "The export finished (1,204 rows exported)."
    assert len(texts) == total


async def test_polling_queued_then_running_then_done() -> None:
    states = ["queued"] * 4 + ["running"] * 6 + ["running (finishing)"] * 3 + ["succeeded"]
    polls = 0

    @tool
    async def get_build(build: int) -> dict[str, Any]:
        """Fetch a CI build."""
        nonlocal polls
        state = states[min(polls, len(states) - 1)]
        polls += 1
        return {"build": build, "state": state}

    def decide(request: ModelRequest) -> Any:
        text = last_text(request)
        if text is not None and '"succeeded"' in text:
            return reply("Build 812 is green.")
        return call("get_build", {"build": 812})

    output, _, _ = await complete(decide, [get_build])
    assert output == "Build 812 is green." and polls == len(states)


# ---------------------------------------------------------------------- 2. paging


async def test_paging_through_results() -> None:
    items = [f"issue-{i}" for i in range(237)]

    @tool
    def list_issues(page: int, per_page: int = 10) -> dict[str, Any]:
        """One page of issues."""
        chunk = items[page * per_page : (page + 1) * per_page]
        return {"page": page, "items": chunk, "has_more": (page + 1) * per_page < len(items)}

    seen: list[str] = []

    def decide(request: ModelRequest) -> Any:
        results = last_results(request)
        if not results:
            return call("list_issues", {"page": 0})
        page = json.loads(results[-1].content)
        seen.extend(page["items"])
        if not page["has_more"]:
            return reply(f"{len(seen)} issues")
        return call("list_issues", {"page": page["page"] + 1})

    output, texts, _ = await complete(decide, [list_issues])
    assert output == "237 issues" and seen == items and len(texts) == 24


async def test_paging_with_a_cursor_and_an_empty_last_page() -> None:
    @tool
    def scan(cursor: str = "") -> str:
        """Scan keys from a cursor."""
        start = int(cursor or 0)
        if start >= 60:
            return ""
        keys = ",".join(f"k{i}" for i in range(start, start + 5))
        return f"next={start + 5} keys={keys}"

    def decide(request: ModelRequest) -> Any:
        text = last_text(request)
        if text is None:
            return call("scan", {})
        if text == "":
            return reply("scanned")
        return call("scan", {"cursor": text.split()[0].removeprefix("next=")})

    output, texts, _ = await complete(decide, [scan])
    assert output == "scanned" and len(texts) == 13


# ------------------------------------------------------- 3. re-reading a file after editing


async def test_read_edit_read_cycles_on_one_file() -> None:
    files = {"app.py": "x = 0\n"}

    @tool
    def read_file(path: str) -> str:
        """Read a file."""
        return files[path]

    @tool
    def edit_file(path: str, old: str, new: str) -> str:
        """Replace text in a file."""
        if old not in files[path]:
            raise ToolError(f"text not found in {path}: {old!r}")
        files[path] = files[path].replace(old, new, 1)
        return f"edited {path}"

    def decide(request: ModelRequest) -> Any:
        text = last_text(request)
        if text is None or text.startswith("edited"):
            return call("read_file", {"path": "app.py"})
        value = int(text.split("=")[1])
        if value >= 12:
            return reply(f"x is now {value}")
        return call(
            "edit_file", {"path": "app.py", "old": f"x = {value}", "new": f"x = {value + 1}"}
        )

    output, texts, recorder = await complete(decide, [read_file, edit_file])
    assert output == "x is now 12"
    assert texts.count("edited app.py") == 12
    assert recorder.of("on_loop_detected") == []


async def test_re_reading_after_a_failed_edit_and_a_fixed_edit() -> None:
    """The classic edit-fails → re-read → retry cycle, done five times over one file."""
    files = {"cfg.toml": "a = 1\n"}
    edits = 0

    @tool
    def read_file(path: str) -> str:
        """Read a file."""
        return files[path]

    @tool
    def edit_file(path: str, old: str, new: str) -> str:
        """Replace text in a file."""
        nonlocal edits
        if old not in files[path]:
            raise ToolError(f"old text not found in {path}")
        edits += 1
        files[path] = files[path].replace(old, new, 1)
        return f"edited {path} ({edits})"

    def decide(request: ModelRequest) -> Any:
        text = last_text(request)
        if text is None or text.startswith(("edited", "old text")):
            return call("read_file", {"path": "cfg.toml"})
        value = int(text.split("=")[1])
        if value >= 6:
            return reply("done")
        stale = len(request.messages) % 3 == 0  # sometimes the model guesses wrong first
        old = "a = 999" if stale else f"a = {value}"
        return call("edit_file", {"path": "cfg.toml", "old": old, "new": f"a = {value + 1}"})

    output, texts, _ = await complete(decide, [read_file, edit_file])
    assert output == "done" and files["cfg.toml"] == "a = 6\n"
    assert texts.count("old text not found in cfg.toml") >= 3


# --------------------------------------------------------------- 4. retries that succeed


@pytest.mark.parametrize("failure", ["tool_error", "exception"])
async def test_a_flaky_tool_that_fails_twice_then_succeeds_for_each_of_many_urls(
    failure: str,
) -> None:
    attempts: dict[str, int] = {}

    @tool
    async def fetch(url: str) -> str:
        """Fetch a URL."""
        attempts[url] = attempts.get(url, 0) + 1
        if attempts[url] <= 2:
            if failure == "tool_error":
                raise ToolError("503 Service Unavailable; try again")
            raise ConnectionError("connection reset by peer")
        return f"<html>{url}</html>"

    urls = [f"https://example.com/{i}" for i in range(6)]

    def decide(request: ModelRequest) -> Any:
        done = sum(
            1
            for m in request.messages
            for r in m.tool_results_parts
            if r.content.startswith("<html>")
        )
        if done == len(urls):
            return reply(f"fetched {done} pages")
        return call("fetch", {"url": urls[done]})

    output, texts, _ = await complete(decide, [fetch])
    assert output == "fetched 6 pages"
    assert all(n == 3 for n in attempts.values())
    assert len(texts) == 18


# ------------------------------------------- 5. many inputs, identical outputs


async def test_existence_checks_for_many_paths_with_identical_answers() -> None:
    candidates = [f"/etc/app/conf.d/{i:02}.yaml" for i in range(15)] + ["/etc/app/app.yaml"]

    @tool
    def exists(path: str) -> str:
        """Whether a path exists."""
        return "true" if path == "/etc/app/app.yaml" else "false"

    def decide(request: ModelRequest) -> Any:
        checked = sum(1 for m in request.messages for _ in m.tool_results_parts)
        if last_text(request) == "true":
            return reply(f"config is {candidates[checked - 1]}")
        return call("exists", {"path": candidates[checked]})

    output, texts, recorder = await complete(decide, [exists])
    assert output == "config is /etc/app/app.yaml"
    assert texts.count("false") == 15
    assert recorder.of("on_loop_detected") == []


# ------------------------------------------------------------- 6. a refined search


async def test_a_search_refined_by_the_model() -> None:
    corpus = [
        f"doc{i}: retry backoff jitter timeout {'cancel' if i % 7 == 0 else ''}" for i in range(80)
    ]

    @tool
    def search(query: str, limit: int = 50) -> str:
        """Full-text search."""
        words = query.split()
        hits = [d for d in corpus if all(w in d for w in words)]
        if not hits:
            return "no results"
        return f"{len(hits)} results: " + "; ".join(hits[:3])

    refinements = ["retry", "retry backoff", "retry backoff nonsense", "retry backoff jitter"]
    refinements += ["retry backoff jitter timeout", "retry xyz", "retry abc"]
    refinements += ["retry backoff jitter timeout cancel"]

    def decide(request: ModelRequest) -> Any:
        asked = sum(1 for m in request.messages for _ in m.tool_results_parts)
        text = last_text(request)
        if text is not None and text.startswith("12 results"):
            return reply("found the 12 cancel-aware docs")
        return call("search", {"query": refinements[asked]})

    output, texts, _ = await complete(decide, [search])
    assert output == "found the 12 cancel-aware docs"
    assert texts.count("no results") == 3


# ----------------------------------------------------------- 7. a long batch of writes


@pytest.mark.parametrize("per_turn", [1, 5])
async def test_a_long_batch_of_independent_writes(per_turn: int) -> None:
    written: dict[str, str] = {}

    @tool
    def write_file(path: str, content: str) -> str:
        """Write a file."""
        written[path] = content
        return "ok"

    total = 45

    def decide(request: ModelRequest) -> Any:
        done = len(written)
        if done >= total:
            return reply(f"wrote {done} files")
        batch = range(done, min(done + per_turn, total))
        return [call("write_file", {"path": f"out/{i}.txt", "content": f"row {i}"}) for i in batch]

    output, texts, _ = await complete(decide, [write_file])
    assert output == "wrote 45 files" and texts == ["ok"] * total


# ------------------------------------------------------ 8. a health check until it is up


async def test_a_health_check_loop_until_the_service_comes_up() -> None:
    checks = 0
    clock = FakeClock()

    @tool
    def health(service: str) -> str:
        """Probe a service's health endpoint."""
        nonlocal checks
        checks += 1
        if checks < 8:
            raise ToolError("connection refused")
        return "200 OK"

    @tool
    async def wait(seconds: float) -> str:
        """Wait."""
        await clock.sleep(seconds)
        return f"waited {seconds}s"

    def decide(request: ModelRequest) -> Any:
        text = last_text(request)
        if text == "200 OK":
            return reply("the API is up")
        if text == "connection refused":
            return call("wait", {"seconds": 0.001})
        return call("health", {"service": "api"})

    output, texts, _ = await complete(decide, [health, wait])
    assert output == "the API is up" and checks == 8
    assert texts.count("connection refused") == 7


async def test_nine_identical_health_checks_are_still_allowed() -> None:
    """The boundary: nine identical results are below the stop of 10 (the tenth is the answer)."""
    checks = 0

    @tool
    def health(service: str) -> str:
        """Probe."""
        nonlocal checks
        checks += 1
        return "down" if checks <= 9 else "up"

    def decide(request: ModelRequest) -> Any:
        return reply("up") if last_text(request) == "up" else call("health", {"service": "db"})

    output, _, recorder = await complete(decide, [health])
    assert output == "up" and checks == 10
    assert [args[1:] for args in recorder.of("on_loop_detected")] == [
        ('health({"service":"db"})', 3)
    ]


# ------------------------------------------------- 9. two tools alternating, both progressing


async def test_alternating_two_tools_that_both_make_progress() -> None:
    state = {"step": 0, "loss": 2.0}

    @tool
    def train_step() -> str:
        """Run one training step."""
        state["step"] += 1
        state["loss"] *= 0.9
        return f"step {state['step']} done"

    @tool
    def eval_loss() -> str:
        """Evaluate the current loss."""
        return f"loss={state['loss']:.4f}"

    def decide(request: ModelRequest) -> Any:
        text = last_text(request)
        if text is not None and text.startswith("loss="):
            if float(text[5:]) < 0.3:
                return reply(f"converged after {state['step']} steps")
            return call("train_step")
        if text is None:
            return call("eval_loss")
        return call("eval_loss")

    output, texts, recorder = await complete(decide, [train_step, eval_loss])
    assert output == "converged after 19 steps" and len(texts) == 39
    assert recorder.of("on_loop_detected") == []


async def test_alternating_failures_that_change_are_progress() -> None:
    """Compile, fix, compile: both fail each time, but with a different error every round."""
    remaining = list(range(12))

    @tool
    def compile_project() -> str:
        """Compile."""
        if remaining:
            raise ToolError(f"error at line {remaining[0] * 10}: undefined name")
        return "build ok"

    @tool
    def fix(line: int) -> str:
        """Fix a line."""
        remaining.pop(0)
        if remaining:
            raise ToolError(f"fixed line {line}; {len(remaining)} errors remain")
        return "all fixed"

    def decide(request: ModelRequest) -> Any:
        text = last_text(request)
        if text == "build ok":
            return reply("green")
        if text is not None and text.startswith("error at line"):
            return call("fix", {"line": int(text.split()[3].rstrip(":"))})
        return call("compile_project")

    output, _, _ = await complete(decide, [compile_project, fix])
    assert output == "green"


# ------------------------------------------ 10. parallel batches of the same tool


@pytest.mark.parametrize("parallel", [False, True])
async def test_batches_of_the_same_tool_with_different_arguments(parallel: bool) -> None:
    @tool
    async def stat(path: str) -> str:
        """File size."""
        await asyncio.sleep(0)
        return f"{path}: {len(path) * 100} bytes"

    batches = [[f"src/m{b}_{i}.py" for i in range(6)] for b in range(8)]

    def decide(request: ModelRequest) -> Any:
        done = sum(1 for m in request.messages if m.role == "tool")
        if done == len(batches):
            return reply("sized everything")
        calls: list[ScriptedCall] = [call("stat", {"path": p}) for p in batches[done]]
        return calls

    config = RunConfig(parallel_tool_calls=parallel)
    output, texts, _ = await complete(decide, [stat], config=config)
    assert output == "sized everything" and len(texts) == 48


# ---------------------------- 11. the same question across runs, with evolving answers


async def test_repeated_status_reports_across_runs_do_not_converge() -> None:
    build = 40

    def decide(request: ModelRequest) -> Any:
        nonlocal build
        build += 1
        return reply(f"Build {build} passed: {build * 3} tests, {build % 4} skipped.")

    recorder = RecordingObserver()
    agent = Agent(
        FunctionModel(decide),
        config=RunConfig(convergence=Convergence(action="stop")),
        observers=[recorder],
    )
    for _ in range(8):
        run = await agent.run("status?")
        assert run.stop_reason is None
    assert recorder.of("on_convergence_detected") == []


# -------------------------------- 12. a monitoring loop tailing a growing log file


async def test_tailing_a_log_until_a_marker_appears() -> None:
    lines: list[str] = []

    @tool
    def tail(path: str, lines_wanted: int = 5) -> str:
        """The last lines of a log (the service writes one line per read here)."""
        lines.append(f"[{len(lines):03}] request served")
        if len(lines) == 25:
            lines.append("[025] shutdown complete")
        return "\n".join(lines[-lines_wanted:])

    def decide(request: ModelRequest) -> Any:
        text = last_text(request)
        if text is not None and "shutdown complete" in text:
            return reply("the service shut down cleanly")
        return call("tail", {"path": "/var/log/svc.log"})

    output, texts, _ = await complete(decide, [tail])
    assert output == "the service shut down cleanly" and len(texts) == 25
