"""Client overhead per model turn over real HTTP: agentloop vs raw aiohttp vs raw httpx loops.

One fast fake OpenAI-compatible server runs in a separate process on 127.0.0.1 (this script
with ``--serve``). It answers ``POST /v1/chat/completions`` instantly: a tool call while the
conversation has fewer than K ``role: tool`` messages, then a final text; JSON, or SSE when the
body says ``"stream": true``. Three clients drive the same K-tool-turn conversation:

- ``agentloop``: ``Agent(OpenAIClient(...), tools=[lookup])`` (one async tool), ``RunConfig``
  with ``stream`` on or off;
- ``aiohttp``: a hand-written loop on one ``aiohttp.ClientSession`` (json + SSE line parsing);
- ``httpx``: the same loop on one ``httpx.AsyncClient`` (skipped, with a message, when httpx is
  not installed);
- with ``--split``, ``agentloop client``: ``OpenAIClient`` in a hand loop with agentloop's
  messages and no ``Agent`` (``ClientLoop``): the provider half alone, so the gap between it
  and ``agentloop`` is the engine's. The raw loops' pools and agentloop's are all 100.

For N = 1 (sequential conversations) and N = 100 (concurrent conversations), each measurement
is repeated and the median kept. Reported per model turn (K + 1 model calls per conversation):
wall-clock milliseconds, and client CPU milliseconds (``time.process_time`` of this process; the
server burns its CPU in its own process, so this is the client's overhead alone). The ratio
column is agentloop / raw aiohttp on client CPU.

    python bench/provider_overhead.py                 # the table
    python bench/provider_overhead.py --profile       # + cProfile of the agentloop loop
    python bench/provider_overhead.py --split         # + OpenAIClient in a hand loop, no Agent

A benchmark, not a test. Only 127.0.0.1 is used.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import json
import os
import pstats
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

HOST = "127.0.0.1"
MODEL = "bench-model"

# --- the fake server (runs in its own process) ------------------------------------------------


def _completion(n: int, k: int) -> dict[str, Any]:
    if n < k:
        call = {
            "id": f"call_{n}",
            "type": "function",
            "function": {"name": "lookup", "arguments": json.dumps({"key": f"k{n}"})},
        }
        message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [call]}
        finish = "tool_calls"
    else:
        message, finish = {"role": "assistant", "content": "All keys looked up."}, "stop"
    return {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion",
        "created": 0,
        "model": MODEL,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 10 + n, "completion_tokens": 5, "total_tokens": 15 + n},
    }


def _sse(n: int, k: int) -> bytes:
    def chunk(choices: list[dict[str, Any]], **extra: Any) -> bytes:
        data = {"id": f"chatcmpl-{n}", "object": "chat.completion.chunk", "created": 0}
        data.update(model=MODEL, choices=choices, **extra)
        return b"data: " + json.dumps(data).encode() + b"\n\n"

    def delta(d: dict[str, Any], finish: str | None = None) -> list[dict[str, Any]]:
        return [{"index": 0, "delta": d, "finish_reason": finish}]

    parts = [chunk(delta({"role": "assistant", "content": ""}))]
    if n < k:
        head = {"index": 0, "id": f"call_{n}", "type": "function"}
        head["function"] = {"name": "lookup", "arguments": ""}
        parts.append(chunk(delta({"tool_calls": [head]})))
        for piece in ('{"key": ', f'"k{n}"}}'):
            parts.append(
                chunk(delta({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}))
            )
        parts.append(chunk(delta({}, "tool_calls")))
    else:
        for piece in ("All keys ", "looked up."):
            parts.append(chunk(delta({"content": piece})))
        parts.append(chunk(delta({}, "stop")))
    usage = {"prompt_tokens": 10 + n, "completion_tokens": 5, "total_tokens": 15 + n}
    parts.append(chunk([], usage=usage))
    parts.append(b"data: [DONE]\n\n")
    return b"".join(parts)


def serve(k: int) -> None:
    """Run the fake server until stdin closes; print ``PORT <n>`` once listening."""
    from aiohttp import web

    json_cache: dict[int, bytes] = {}
    sse_cache: dict[int, bytes] = {}

    async def handle(request: web.Request) -> web.StreamResponse:
        body = json.loads(await request.read())
        n = sum(1 for m in body["messages"] if m.get("role") == "tool")
        if not body.get("stream"):
            data = json_cache.get(n) or json_cache.setdefault(
                n, json.dumps(_completion(n, k)).encode()
            )
            return web.Response(body=data, content_type="application/json")
        data = sse_cache.get(n) or sse_cache.setdefault(n, _sse(n, k))
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(data)
        await response.write_eof()
        return response

    async def cpu(request: web.Request) -> web.Response:
        return web.Response(text=repr(time.process_time()))

    async def main() -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", handle)
        app.router.add_get("/v1/cpu", cpu)  # the server's own CPU seconds, for wall - server
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, HOST, 0, backlog=1024)
        await site.start()
        print(f"PORT {runner.addresses[0][1]}", flush=True)
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, sys.stdin.read)  # the parent closes stdin to stop us
        await runner.cleanup()

    asyncio.run(main())


# --- the three clients -----------------------------------------------------------------------

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "Look a key up.",
            "parameters": {
                "type": "object",
                "properties": {"key": {"type": "string"}},
                "required": ["key"],
            },
        },
    }
]


async def lookup_raw(key: str) -> str:
    return f"value of {key}"


class _Accumulator:
    """The minimal SSE delta accumulation a hand loop needs (text + tool calls by index)."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}

    def feed(self, data: bytes) -> None:
        chunk = json.loads(data)
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") or {}
            if delta.get("content"):
                self.text.append(delta["content"])
            for part in delta.get("tool_calls") or ():
                call = self.calls.setdefault(
                    part["index"],
                    {"id": "", "type": "function", "function": {"name": "", "arguments": ""}},
                )
                if part.get("id"):
                    call["id"] = part["id"]
                function = part.get("function") or {}
                if function.get("name"):
                    call["function"]["name"] = function["name"]
                call["function"]["arguments"] += function.get("arguments") or ""

    def message(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self.text) or None}
        if self.calls:
            message["tool_calls"] = [self.calls[i] for i in sorted(self.calls)]
        return message


def _payload(messages: list[dict[str, Any]], stream: bool) -> dict[str, Any]:
    payload: dict[str, Any] = {"model": MODEL, "messages": messages, "tools": TOOLS}
    if stream:
        payload["stream"] = True
        payload["stream_options"] = {"include_usage": True}
    return payload


async def _after_reply(messages: list[dict[str, Any]], message: dict[str, Any]) -> bool:
    """Append the reply and run its tool calls; True when the conversation is over."""
    messages.append(message)
    calls = message.get("tool_calls")
    if not calls:
        return True
    for call in calls:
        result = await lookup_raw(**json.loads(call["function"]["arguments"]))
        messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
    return False


HEADERS = {"Authorization": "Bearer sk-bench"}


class AiohttpLoop:
    name = "raw aiohttp"

    def __init__(self, url: str, pool: int | None = None) -> None:
        """``pool``: the connector's ``limit`` (None: aiohttp's default, 100)."""
        import aiohttp

        self.url = f"{url}/chat/completions"
        connector = aiohttp.TCPConnector(limit=pool) if pool is not None else None
        self.session = aiohttp.ClientSession(headers=HEADERS, connector=connector)

    async def run(self, stream: bool) -> int:
        messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
        turns = 0
        while True:
            turns += 1
            async with self.session.post(self.url, json=_payload(messages, stream)) as response:
                response.raise_for_status()
                if stream:
                    acc = _Accumulator()
                    async for line in response.content:
                        if not line.startswith(b"data: "):
                            continue
                        data = line[6:].strip()
                        if data == b"[DONE]":
                            break
                        acc.feed(data)
                    message = acc.message()
                else:
                    message = (await response.json())["choices"][0]["message"]
            if await _after_reply(messages, message):
                return turns

    async def aclose(self) -> None:
        await self.session.close()


class HttpxLoop:
    name = "raw httpx"

    def __init__(self, url: str) -> None:
        import httpx

        self.url = f"{url}/chat/completions"
        self.client = httpx.AsyncClient(headers=HEADERS, timeout=60.0)

    async def run(self, stream: bool) -> int:
        messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
        turns = 0
        while True:
            turns += 1
            payload = _payload(messages, stream)
            if stream:
                async with self.client.stream("POST", self.url, json=payload) as response:
                    response.raise_for_status()
                    acc = _Accumulator()
                    async for line in response.aiter_lines():
                        if not line.startswith("data: "):
                            continue
                        data = line[6:].strip()
                        if data == "[DONE]":
                            break
                        acc.feed(data.encode())
                    message = acc.message()
            else:
                response = await self.client.post(self.url, json=payload)
                response.raise_for_status()
                message = response.json()["choices"][0]["message"]
            if await _after_reply(messages, message):
                return turns

    async def aclose(self) -> None:
        await self.client.aclose()


class AgentloopLoop:
    name = "agentloop"

    def __init__(self, url: str, pool: int | None = None) -> None:
        """``pool``: the client's ``max_connections`` (None: agentloop's default)."""
        from agentloop import tool
        from agentloop.providers import OpenAIClient

        @tool
        async def lookup(key: str) -> str:
            """Look a key up."""
            return f"value of {key}"

        self.tool = lookup
        options = {} if pool is None else {"max_connections": pool}
        self.client = OpenAIClient(MODEL, api_key="sk-bench", base_url=url, **options)
        from agentloop import Agent, RunConfig

        # an application builds its agent once and runs each conversation on a session of it
        # (SPEC 20): one agent per mode, a new session per run
        self.agents = {
            s: Agent(self.client, tools=[lookup], config=RunConfig(stream=s)) for s in (False, True)
        }

    async def run(self, stream: bool) -> int:
        run = await self.agents[stream].session().run("go")
        return len(run.turns)

    async def aclose(self) -> None:
        await self.client.aclose()


class ClientLoop:
    """agentloop's provider half alone: ``OpenAIClient`` driven by a hand loop, no ``Agent``.

    The same conversation as the raw loops, with agentloop's messages, requests and replies
    (``complete`` or ``stream``): next to ``raw aiohttp`` it is the provider half's cost, and
    next to ``agentloop`` the engine's (``--split``).
    """

    name = "agentloop client"

    def __init__(self, url: str, pool: int | None = None) -> None:
        from agentloop.model import ToolSpec
        from agentloop.providers import OpenAIClient

        options = {} if pool is None else {"max_connections": pool}
        self.client = OpenAIClient(MODEL, api_key="sk-bench", base_url=url, **options)
        function = TOOLS[0]["function"]
        self.tools = (ToolSpec("lookup", function["description"], function["parameters"]),)

    async def run(self, stream: bool) -> int:
        from agentloop.messages import Message, ToolResultPart
        from agentloop.model import ModelRequest, ModelResponse

        messages = [Message.user("go")]
        turns = 0
        while True:
            turns += 1
            request = ModelRequest(messages=tuple(messages), tools=self.tools)
            response: ModelResponse | None = None
            if stream:
                async for event in self.client.stream(request):
                    response = event.response if event.kind == "done" else response
            else:
                response = await self.client.complete(request)
            assert response is not None
            messages.append(response.message)
            calls = response.message.tool_calls
            if not calls:
                return turns
            results = [ToolResultPart(c.id, c.name, await lookup_raw(**c.arguments)) for c in calls]
            messages.append(Message.tool_results(results))

    async def aclose(self) -> None:
        await self.client.aclose()


Loop = AgentloopLoop | AiohttpLoop | HttpxLoop | ClientLoop

# --- measurement -----------------------------------------------------------------------------


def server_cpu(url: str) -> float:
    """The fake server's CPU seconds so far (its ``GET /v1/cpu``; read outside the timing)."""
    from urllib.request import urlopen

    with urlopen(f"{url}/cpu", timeout=10) as reply:
        return float(reply.read())


async def trial(
    loop: Loop, stream: bool, concurrency: int, conversations: int, k: int, url: str = ""
) -> tuple[float, float, float]:
    """(wall ms, client CPU ms, wall - server CPU ms) per model turn over ``conversations``."""

    async def batch() -> int:
        results = await asyncio.gather(*(loop.run(stream) for _ in range(concurrency)))
        return sum(results)

    await batch()  # warm-up: connections open, caches filled
    gc.collect()
    rounds = max(1, conversations // concurrency)
    turns = 0
    served0 = server_cpu(url) if url else 0.0
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for _ in range(rounds):
        turns += await batch()
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    served = server_cpu(url) - served0 if url else 0.0
    assert turns == rounds * concurrency * (k + 1), f"{loop.name}: {turns} turns"
    return wall / turns * 1e3, cpu / turns * 1e3, (wall - served) / turns * 1e3


Result = tuple[float, float, float]  # wall, client CPU, wall - server CPU: ms per model turn


async def measure(
    url: str, factories: list[Callable[[str], Loop]], args: argparse.Namespace
) -> dict[tuple[str, bool, int], Result]:
    samples: dict[tuple[str, bool, int], list[Result]] = defaultdict(list)
    for stream in (False, True):
        for concurrency in (1, 100):
            conversations = args.conversations if concurrency == 1 else 100 * args.rounds
            for _ in range(args.repeats):  # interleaved, so drift hits every client alike
                for factory in factories:
                    loop = factory(url)
                    try:
                        result = await trial(
                            loop, stream, concurrency, conversations, args.turns, url
                        )
                    finally:
                        await loop.aclose()
                    samples[(loop.name, stream, concurrency)].append(result)
    return {
        key: (
            statistics.median(w for w, _, _ in values),
            statistics.median(c for _, c, _ in values),
            statistics.median(n for _, _, n in values),
        )
        for key, values in samples.items()
    }


def report(results: dict[tuple[str, bool, int], Result], names: list[str]) -> None:
    """The table; both ratios against raw aiohttp: client CPU, and wall less the server's CPU."""
    print()
    print("| mode | N | client | wall ms/turn | client CPU ms/turn | CPU ratio vs raw aiohttp "
          "| wall - server CPU ms/turn | its ratio |")  # fmt: skip
    print("|---|---:|---|---:|---:|---:|---:|---:|")
    for stream in (False, True):
        for concurrency in (1, 100):
            _, base, base_net = results[("raw aiohttp", stream, concurrency)]
            for name in names:
                wall, cpu, net = results[(name, stream, concurrency)]
                mode = "SSE" if stream else "JSON"
                cells = f"{wall:.3f} | {cpu:.3f} | {cpu / base:.2f}x"
                cells += f" | {net:.3f} | {net / base_net:.2f}x"
                print(f"| {mode} | {concurrency} | {name} | {cells} |")


async def profile(url: str, args: argparse.Namespace) -> None:
    """cProfile of the agentloop loop, N = 1, both modes: top functions and time per module."""
    for stream in (False, True):
        loop = AgentloopLoop(url)
        try:
            await loop.run(stream)
            profiler = cProfile.Profile()
            profiler.enable()
            for _ in range(args.conversations):
                await loop.run(stream)
            profiler.disable()
        finally:
            await loop.aclose()
        stats = pstats.Stats(profiler)
        total = sum(entry[2] for entry in stats.stats.values())  # type: ignore[attr-defined]
        by_module: dict[str, float] = defaultdict(float)
        for (path, _, _), entry in stats.stats.items():  # type: ignore[attr-defined]
            by_module[_module(path)] += entry[2]
        print(f"\n## profile: agentloop, {'SSE' if stream else 'JSON'}, N=1 (share of own time)")
        for module, seconds in sorted(by_module.items(), key=lambda kv: -kv[1])[:15]:
            print(f"  {seconds / total:6.1%}  {module}")
        print("  -- top functions by own time --")
        top = sorted(stats.stats.items(), key=lambda kv: -kv[1][2])[: args.top]  # type: ignore[attr-defined]
        for (path, line, func), entry in top:
            print(f"  {entry[2] / total:6.1%}  {_module(path)}:{line}:{func}  calls={entry[1]}")
        print("  -- agentloop functions by cumulative time --")
        ours = [(key, entry) for key, entry in stats.stats.items() if "agentloop" in key[0]]  # type: ignore[attr-defined]
        for (path, line, func), entry in sorted(ours, key=lambda kv: -kv[1][3])[: args.top]:
            print(f"  {entry[3] / total:6.1%} cum  {_module(path)}:{line}:{func}")


def _module(path: str) -> str:
    for marker in ("site-packages/", "src/", "lib/python3"):
        if marker in path:
            tail = path.split(marker, 1)[1]
            return tail.split("/", 1)[1] if marker == "lib/python3" else tail
    return os.path.basename(path) if path != "~" else "<builtins>"


def start_server(k: int) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), "--serve", "--turns", str(k)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline().strip()
    if not line.startswith("PORT "):
        process.kill()
        raise SystemExit(f"the fake server did not start: {line!r}")
    return process, f"http://{HOST}:{line.split()[1]}/v1"


async def run_bench(args: argparse.Namespace) -> None:
    factories: list[Callable[[str], Loop]] = [AgentloopLoop, AiohttpLoop]
    if args.split:
        factories.insert(1, ClientLoop)
    try:
        import httpx  # noqa: F401
    except ImportError:
        print("httpx is not installed: skipping the raw httpx loop (pip install httpx)")
    else:
        if not args.no_httpx:
            factories.append(HttpxLoop)
    names = [factory.name for factory in factories]
    process, url = start_server(args.turns)
    try:
        print(f"server {url} (pid {process.pid}); K={args.turns} tool turns + 1 final per run;")
        python = sys.version.split()[0]
        print(f"N=1: {args.conversations} runs, N=100: {args.rounds} x 100 runs; median of "
              f"{args.repeats}; python {python}, {os.cpu_count()} CPUs")  # fmt: skip
        results = await measure(url, factories, args)
        report(results, names)
        if args.profile:
            await profile(url, args)
    finally:
        assert process.stdin is not None
        process.stdin.close()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=10, help="tool turns per run (K)")
    parser.add_argument("--conversations", type=int, default=30, help="runs per N=1 sample")
    parser.add_argument("--rounds", type=int, default=2, help="batches of 100 per N=100 sample")
    parser.add_argument("--repeats", type=int, default=5, help="samples per cell (median)")
    parser.add_argument("--profile", action="store_true", help="cProfile the agentloop loop")
    parser.add_argument("--top", type=int, default=25, help="functions listed by --profile")
    parser.add_argument("--split", action="store_true", help="+ agentloop's client alone")
    parser.add_argument("--no-httpx", action="store_true", help="skip the raw httpx loop")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.turns)
        return
    asyncio.run(run_bench(args))


if __name__ == "__main__":
    main()
