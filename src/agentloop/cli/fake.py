"""``agentloop fake-server``: the fault-injecting fake provider as a command (flags, banner).

The server itself is ``agentloop.testing.FakeProviderServer``; this module only reads the flags
(``--faults`` first, then ``--script``'s steps, ``--models``) and prints what it serves.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentloop.testing import FakeProviderServer

__all__ = ["FAULTS", "add_parser", "fault_list", "serve"]

FAULTS = (
    "rate_limit",
    "auth",
    "insufficient_credits",
    "quota",
    "context_overflow",
    "server_error",
    "redirect",
    "reset",
    "hang",
    "truncate",
    "malformed",
)


def _server_for(
    port: int, faults: Sequence[str], script: str | None, models: Sequence[str] | None
) -> FakeProviderServer:
    """The server the flags describe: ``--faults`` first, then the script's steps."""
    from agentloop.testing import FakeProviderServer, FakeReply, FakeScript, Fault, load_fake_script

    parsed = FakeScript(default=FakeReply("ok")) if script is None else load_fake_script(script)
    steps = [*(getattr(Fault, name)() for name in faults), *parsed.steps]
    return FakeProviderServer(
        steps,
        default=parsed.default,
        model=models[0] if models else parsed.model,
        models=models or parsed.models,
        port=port,
        rate_limit=parsed.rate_limit,
        batch_after=parsed.batch_after,
    )


async def _serve(server: FakeProviderServer, faults: Sequence[str], script: str | None) -> int:
    await server.start()
    print(f"fake OpenAI-compatible server on {server.base_url} (Ctrl-C to stop)", flush=True)
    served = ", ".join(server.models) if server.models else f"any ({server.model} echoed)"
    print(f"models: {served}", flush=True)
    if faults:
        n = len(faults)
        first = "the first request fails" if n == 1 else f"the first {n} requests fail"
        print(f"{first} with: {', '.join(faults)}", flush=True)
    if script is not None:
        print(f"playing the script {script}, one step per request", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await server.close()
        print(_tally(server), flush=True)
    return 0


def _tally(server: FakeProviderServer) -> str:
    """What the server answered, printed when it stops (a fleet's run reads its 429s here)."""
    said = f"received {len(server.requests)} requests"
    if server.rate_limit is None:
        return said
    rpm, window = server.rate_limit
    return f"{said}; answered {server.rate_limited} with a 429 (rate limit {rpm} per {window:g} s)"


def serve(args: argparse.Namespace) -> int:
    """Run the server the parsed flags describe until Ctrl-C."""
    server = _server_for(args.port, args.faults, args.script, args.models)
    return asyncio.run(_serve(server, args.faults, args.script))


def fault_list(text: str) -> list[str]:
    """``--faults``: comma-separated fault names (``-`` or ``_``), each one we know."""
    names = [name.strip().replace("-", "_") for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in FAULTS]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown fault(s): {', '.join(unknown)}")
    return names


def name_list(text: str) -> list[str]:
    """A comma-separated list of names, blanks left out."""
    return [name.strip() for name in text.split(",") if name.strip()]


def add_parser(sub: Any) -> None:
    """The ``fake-server`` subcommand and its flags on ``sub`` (argparse's subparsers)."""
    fake = sub.add_parser("fake-server", help="run the fault-injecting fake provider")
    fake.add_argument("--port", type=int, default=0, help="0 (the default) picks a free port")
    fake.add_argument(
        "--faults",
        type=fault_list,
        default=[],
        help=f"comma-separated faults for the first requests: {', '.join(FAULTS)}",
    )
    fake.add_argument(
        "--script",
        metavar="FILE",
        help="replies, tool calls, faults and delays per request, from JSON or TOML "
        "(docs/fake-server.md); without it every request is answered 'ok'",
    )
    fake.add_argument(
        "--models",
        type=name_list,
        help="comma-separated models served; others get 404 model_not_found (default: any)",
    )
